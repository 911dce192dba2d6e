// Small helpers for the data sets' text list files (images.txt, Ebay_train.txt, anno_train.csv):
// reading lines and parsing fields, with errors that name the file and the line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace data::detail {

// The lines of a list file's text without their line endings ("\n" or "\r\n"); blank lines are
// kept so that line numbers stay right. The readers split what engine::detail::read_whole_file
// returns with it, and tests/fuzz/fuzz_list_file.cpp any bytes.
std::vector<std::string> split_lines(std::string_view text);

// Fields separated by runs of spaces/tabs (sep == ' ') or by one character (e.g. ',').
std::vector<std::string> split_fields(const std::string& line, char sep);

bool is_blank(const std::string& line);

// A whole-token decimal integer; otherwise an error "<path>:<line>: <field> '<token>' ...".
int64_t parse_int(const std::string& token, const std::string& path, int64_t line,
                  const char* field);

bool file_exists(const std::string& path);
bool directory_exists(const std::string& path);
std::string join_path(const std::string& dir, const std::string& name);

}  // namespace data::detail
