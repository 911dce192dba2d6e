// libFuzzer target: the safetensors parser must reject any malformed input with engine::Error
// and never crash, read out of bounds or allocate unboundedly (docs/testing.md, Fuzzing).
#include <cstddef>
#include <cstdint>

#include "engine/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    engine::parse_safetensors(data, size, "fuzz-input");
  } catch (const engine::Error&) {
  }
  return 0;
}
