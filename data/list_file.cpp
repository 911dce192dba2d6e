// Text list-file helpers (see list_file.h).
#include "data/list_file.h"

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "kernels/common/check.h"

namespace data::detail {

using engine::fail;

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  // As std::getline splits: a final "\n" ends the last line rather than starting an empty one.
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.emplace_back(line);
    start = end + 1;
  }
  return lines;
}

std::vector<std::string> split_fields(const std::string& line, char sep) {
  std::vector<std::string> fields;
  if (sep == ' ') {
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i == line.size()) break;
      std::size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
      fields.push_back(line.substr(i, j - i));
      i = j;
    }
    return fields;
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t end = line.find(sep, start);
    fields.push_back(
        line.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return fields;
}

bool is_blank(const std::string& line) {
  return line.find_first_not_of(" \t") == std::string::npos;
}

int64_t parse_int(const std::string& token, const std::string& path, int64_t line,
                  const char* field) {
  std::size_t begin = token.find_first_not_of(" \t");
  std::size_t end = token.find_last_not_of(" \t");
  const std::string t = begin == std::string::npos ? "" : token.substr(begin, end - begin + 1);
  errno = 0;
  char* stop = nullptr;
  const long long value = std::strtoll(t.c_str(), &stop, 10);
  if (t.empty() || stop != t.c_str() + t.size() || errno == ERANGE) {
    fail(path, ":", line, ": ", field, " '", token, "' is not an integer");
  }
  return static_cast<int64_t>(value);
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

bool directory_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

std::string join_path(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

}  // namespace data::detail
