// read_json_object_file (json_file.h): nlohmann's parser with a callback that tracks where it is.
#include "tools/dml/json_file.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <vector>

#include "kernels/common/check.h"
#include "tools/dml/args.h"

namespace dml {

namespace {

using nlohmann::json;

// The keys of the objects the parser is inside, outermost first, and the keys seen so far in
// each: enough to name where an error happened and to see a key written twice.
class KeyTracker {
 public:
  // nlohmann's parser_callback_t: returns true to keep every value.
  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:  // `depth` counts lists too
        seen_.emplace_back();
        path_.resize(static_cast<size_t>(depth));
        break;
      case json::parse_event_t::array_start:
        path_.resize(static_cast<size_t>(depth));
        break;
      case json::parse_event_t::key: {
        const std::string key = parsed.get<std::string>();
        path_.resize(static_cast<size_t>(depth) - 1);
        path_.push_back(key);
        if (!seen_.back().insert(key).second) duplicate_ = where();
        break;
      }
      case json::parse_event_t::object_end:
        seen_.pop_back();
        break;
      default:
        break;
    }
    return true;
  }
  // "optimizer.lr", or "" before the first key.
  std::string where() const {
    std::string dotted;
    for (const std::string& key : path_) {
      if (!key.empty()) dotted += (dotted.empty() ? "" : ".") + key;  // "": a list's element
    }
    return dotted;
  }
  const std::string& duplicate() const { return duplicate_; }

 private:
  std::vector<std::string> path_;
  std::vector<std::set<std::string>> seen_;
  std::string duplicate_;  // the first key written twice, dotted
};

}  // namespace

json read_json_object_file(const std::string& path, const std::string& what) {
  const std::string name = what + " '" + path + "'";
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) throw UsageError(name + " is a folder");
  std::ifstream in(path);
  if (!in) throw UsageError(name + " cannot be opened (missing or unreadable)");
  KeyTracker tracker;
  json value;
  try {
    value = json::parse(in, [&](int depth, json::parse_event_t event, json& parsed) {
      return tracker(depth, event, parsed);
    });
  } catch (const json::exception& e) {  // parse errors and numbers out of a double's range
    const std::string key = tracker.where();
    throw UsageError(name + " is not valid JSON" + (key.empty() ? "" : " (at key '" + key + "')") +
                     ": " + e.what());
  }
  if (!tracker.duplicate().empty()) {
    throw UsageError(name + ": key '" + tracker.duplicate() + "' is written twice");
  }
  if (!value.is_object()) {
    throw UsageError(name + " must hold a JSON object, got " + std::string(value.type_name()));
  }
  return value;
}

std::optional<int64_t> integer_of(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

int64_t integer_at(const nlohmann::json& object, const char* key, const std::string& where) {
  const nlohmann::json& value = object.at(key);
  const std::optional<int64_t> integer = integer_of(value);
  if (!integer) engine::fail(where, ": \"", key, "\" ", value.dump(), " is not an integer");
  return *integer;
}

}  // namespace dml
