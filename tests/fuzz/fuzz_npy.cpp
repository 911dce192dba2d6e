// libFuzzer target: the .npy parser (docs/testing.md, Fuzzing).
#include <cstddef>
#include <cstdint>

#include "engine/io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    engine::parse_npy(data, size, "fuzz-input");
  } catch (const engine::Error&) {
  }
  return 0;
}
