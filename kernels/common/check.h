// Error reporting shared by every layer. Plain C++: usable from CPU code, CUDA launchers and the
// engine alike. An `engine::Error` always says what was wrong and where (op, shape, file, key).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace engine {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Builds a message from any streamable pieces: fail("conv2d: expected 4-D input, got ", dims).
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw Error(message.str());
}

}  // namespace engine

// ENGINE_CHECK(cond, parts...) throws engine::Error with the joined parts when cond is false.
#define ENGINE_CHECK(cond, ...)    \
  do {                             \
    if (!(cond)) {                 \
      ::engine::fail(__VA_ARGS__); \
    }                              \
  } while (0)
