// host_memory_budget (host_memory.h): three limits, read when a large tensor is allocated.
#include "engine/host_memory.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "kernels/common/check.h"

namespace engine {

namespace {

// The first number of the line of /proc/meminfo that starts with `key` (in kB there).
std::optional<uint64_t> meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream fields(line.substr(key.size()));
    uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return std::nullopt;
}

// One number from a cgroup v2 file; nullopt for "max" (no limit) or a missing file.
std::optional<uint64_t> cgroup_value(const std::string& name) {
  std::ifstream in("/sys/fs/cgroup/" + name);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void take_smaller(std::optional<HostMemoryBudget>& budget, uint64_t bytes,
                  const std::string& name) {
  if (!budget || bytes < budget->bytes) budget = HostMemoryBudget{bytes, name};
}

}  // namespace

std::optional<HostMemoryBudget> host_memory_budget(uint64_t bytes_in_use) {
  std::optional<HostMemoryBudget> budget;
  if (const std::optional<uint64_t> available = meminfo_bytes("MemAvailable:")) {
    take_smaller(budget, *available, "the system's available memory (MemAvailable)");
  }
  const std::optional<uint64_t> cgroup_max = cgroup_value("memory.max");
  const std::optional<uint64_t> cgroup_current = cgroup_value("memory.current");
  if (cgroup_max && cgroup_current) {
    take_smaller(budget, *cgroup_max - std::min(*cgroup_max, *cgroup_current),
                 "the control group's memory.max");
  }
  if (const char* cap = std::getenv("ENGINE_HOST_MEMORY_LIMIT"); cap != nullptr && *cap != '\0') {
    const uint64_t limit = parse_byte_size(cap, "ENGINE_HOST_MEMORY_LIMIT");
    take_smaller(budget, limit - std::min(limit, bytes_in_use),
                 "ENGINE_HOST_MEMORY_LIMIT=" + std::string(cap));
  }
  return budget;
}

uint64_t parse_byte_size(const std::string& text, const std::string& what) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string suffix = text.substr(digits);
  int shift = -1;
  if (suffix.empty() || suffix == "B") shift = 0;
  if (suffix == "K") shift = 10;
  if (suffix == "M") shift = 20;
  if (suffix == "G") shift = 30;
  if (suffix == "T") shift = 40;
  ENGINE_CHECK(digits > 0 && digits <= 15 && shift >= 0, what, ": '", text,
               "' is not a size (a whole number, optionally followed by K, M, G or T)");
  return std::stoull(text.substr(0, digits)) << shift;
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 6) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

}  // namespace engine
