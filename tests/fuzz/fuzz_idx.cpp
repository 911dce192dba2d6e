// libFuzzer target: the IDX reader (plain and gzip) goes through a file, as in real use.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "data/idx.h"
#include "kernels/common/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/fuzz-idx-" + std::to_string(getpid());
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  try {
    data::read_idx(path);
  } catch (const engine::Error&) {
  }
  return 0;
}
