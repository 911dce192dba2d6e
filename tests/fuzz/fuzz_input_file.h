// For libFuzzer targets whose parser reads a file (as in real use): writes the input to a file
// named after the target and this process, overwritten on each call, and returns its path, or ""
// when the file cannot be written (the target then skips the input).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace fuzz {

inline std::string write_input_file(const std::string& stem, const uint8_t* data, size_t size) {
  const std::string path = "/tmp/" + stem + "-" + std::to_string(getpid());
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return "";
  const bool written = std::fwrite(data, 1, size, file) == size;
  return std::fclose(file) == 0 && written ? path : "";
}

}  // namespace fuzz
