// Reading a JSON file that a person wrote (a `dml train` config): every mistake is a usage error
// that names the file and, where there is one, the key it happened under.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace dml {

// The JSON object in `path`. UsageError (exit 2), naming `path`, for: a missing or unreadable file,
// a folder, text that is not JSON (with the key being read, e.g. a number that overflows a double
// under "optimizer.lr"), a key written twice in one object (JSON parsers keep one of the two
// silently, so a config would not do what it says), and a value that is not an object.
nlohmann::json read_json_object_file(const std::string& path, const std::string& what);

}  // namespace dml
