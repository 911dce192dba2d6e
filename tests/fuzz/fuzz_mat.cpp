// libFuzzer target: the MATLAB v5 reader used for CARS196's cars_annos.mat (docs/testing.md,
// Fuzzing).
#include <cstddef>
#include <cstdint>

#include "data/mat_file.h"
#include "kernels/common/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    data::parse_mat(data, size, "fuzz-input");
  } catch (const engine::Error&) {
  }
  return 0;
}
