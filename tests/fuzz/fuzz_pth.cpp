// libFuzzer target: the torch.save reader (zip directory, restricted pickle, tensor views) must
// reject any malformed input with engine::Error and never crash, read out of bounds, recurse or
// allocate unboundedly (docs/testing.md, Fuzzing). Seeds: tests/fuzz/seeds/pth.
#include <cstddef>
#include <cstdint>

#include "engine/io/pth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    engine::parse_pth(data, size, "fuzz-input");
  } catch (const engine::Error&) {
  }
  return 0;
}
