// Header: engine/dist/launch_env.h.
#include "engine/dist/launch_env.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "kernels/common/check.h"

namespace engine::dist {

namespace {

constexpr double kDefaultTimeoutSeconds = 600.0;

int positive_int_env(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  ENGINE_CHECK(*end == '\0' && value > 0 && value < (1L << 30), name, "=", text,
               ": not a positive number of ranks");
  return static_cast<int>(value);
}

}  // namespace

int launcher_world_size() {
  if (const int size = positive_int_env("OMPI_COMM_WORLD_SIZE")) return size;
  return positive_int_env("PMI_SIZE");
}

double timeout_from_environment() {
  const char* text = std::getenv("DML_DIST_TIMEOUT_S");
  if (text == nullptr || *text == '\0') return kDefaultTimeoutSeconds;
  char* end = nullptr;
  errno = 0;
  const double seconds = std::strtod(text, &end);
  ENGINE_CHECK(*end == '\0' && errno == 0 && std::isfinite(seconds) && seconds > 0,
               "DML_DIST_TIMEOUT_S=", text, ": not a positive number of seconds");
  return seconds;
}

}  // namespace engine::dist
