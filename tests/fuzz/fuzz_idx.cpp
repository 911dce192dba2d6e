// libFuzzer target: the IDX reader (plain and gzip) goes through a file, as in real use.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/idx.h"
#include "kernels/common/check.h"
#include "tests/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input_file("fuzz-idx", data, size);
  if (path.empty()) return 0;
  try {
    data::read_idx(path);
  } catch (const engine::Error&) {
  }
  return 0;
}
