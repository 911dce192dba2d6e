// Reading a JSON file that a person wrote (a `dml train` config): every mistake is a usage error
// that names the file and, where there is one, the key it happened under.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dml {

// The JSON object in `path`. UsageError (exit 2), naming `path`, for: a missing or unreadable file,
// a folder, text that is not JSON (with the key being read, e.g. a number that overflows a double
// under "optimizer.lr"), a key written twice in one object (JSON parsers keep one of the two
// silently, so a config would not do what it says), and a value that is not an object.
nlohmann::json read_json_object_file(const std::string& path, const std::string& what);

// The integer a JSON value holds, if it is one that fits int64_t. nlohmann's get<int64_t>() also
// converts floating-point numbers, and one out of int64_t's range (1e300) is undefined behaviour;
// every reader of a count from a file that was not just written by this process goes through here.
std::optional<int64_t> integer_of(const nlohmann::json& value);

// `object[key]` as an integer; engine::Error "<where>: \"<key>\" <value> is not an integer" when it
// is another value, and nlohmann's out_of_range (as `at`) when it is missing.
int64_t integer_at(const nlohmann::json& object, const char* key, const std::string& where);

}  // namespace dml
