// The range checks of the config reader (config.cpp, config_defense.cpp): reads a resolved config
// (defaults filled in, types already checked) by dotted key and fails with a dml::UsageError that
// names the file and the key.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/text.h"
#include "tools/dml/args.h"

namespace dml {

// Reads and range-checks resolved values; `prefix` (e.g. "optimizer.groups[0].") is put before
// the keys in messages.
class ConfigChecker {
 public:
  ConfigChecker(const nlohmann::json& resolved, std::string source, std::string prefix = "")
      : resolved_(resolved), source_(std::move(source)), prefix_(std::move(prefix)) {}

  const nlohmann::json& at(const std::string& key) const {
    const nlohmann::json* node = &resolved_;
    std::stringstream stream(key);
    std::string part;
    while (std::getline(stream, part, '.')) node = &node->at(part);
    return *node;
  }
  std::string str(const std::string& key) const { return at(key).get<std::string>(); }
  bool flag(const std::string& key) const { return at(key).get<bool>(); }
  // Integers with a lower bound.
  int64_t integer(const std::string& key, int64_t minimum) const {
    const int64_t value = at(key).get<int64_t>();
    if (value < minimum) fail(key, "must be >= " + std::to_string(minimum), at(key));
    return value;
  }
  int64_t integer_in(const std::string& key, int64_t minimum, int64_t maximum) const {
    const int64_t value = at(key).get<int64_t>();
    if (value < minimum || value > maximum) {
      fail(key, "must be in " + std::to_string(minimum) + ".." + std::to_string(maximum), at(key));
    }
    return value;
  }
  double number(const std::string& key, double minimum, bool strict) const {
    const double value = at(key).get<double>();
    if (!std::isfinite(value) || value < minimum || (strict && value == minimum)) {
      fail(key, std::string("must be a finite number ") + (strict ? "> " : ">= ") + fmt(minimum),
           at(key));
    }
    return value;
  }
  double finite(const std::string& key) const {
    const double value = at(key).get<double>();
    if (!std::isfinite(value)) fail(key, "must be a finite number", at(key));
    return value;
  }
  std::string one_of(const std::string& key, const std::vector<std::string>& allowed) const {
    const std::string value = str(key);
    for (const std::string& a : allowed) {
      if (a == value) return value;
    }
    fail(key, "must be one of " + engine::join(allowed), at(key));
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why,
                         const nlohmann::json& value) const {
    throw UsageError(source_ + ": config key '" + prefix_ + key + "' " + why + ", got " +
                     value.dump());
  }

 private:
  static std::string fmt(double x) {
    std::ostringstream out;
    out << x;
    return out.str();
  }
  const nlohmann::json& resolved_;
  std::string source_;
  std::string prefix_;
};

}  // namespace dml
