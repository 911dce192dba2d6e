// libFuzzer target: image decoding (stb_image: JPEG, PNG, BMP, GIF, ...) through a file, as the
// CUB/CARS/SOP loaders use it. Any input must decode to a [3, H, W] tensor of values in [0, 1] or
// fail with engine::Error; never crash, read out of bounds or ask for gigabytes (docs/testing.md,
// Fuzzing). stb_image itself comes precompiled from Debian (libstb), so the fuzzer's coverage
// guidance stops at its boundary: this target exercises our wrapper (the size guard, the HWC -> CHW
// conversion) and checks that every stb failure surfaces as an engine::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "data/transforms.h"
#include "kernels/common/check.h"
#include "tests/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input_file("fuzz-image", data, size);
  if (path.empty()) return 0;
  try {
    const engine::Tensor image = data::decode_image(path);
    // A decoded image must be what the loaders expect; anything else is a bug worth a crash.
    if (image.dim() != 3 || image.size(0) != 3 || image.size(1) < 1 || image.size(2) < 1) {
      std::abort();
    }
    const float* pixels = image.data<float>();
    for (int64_t i = 0; i < image.numel(); ++i) {
      if (!(pixels[i] >= 0.0f && pixels[i] <= 1.0f)) std::abort();
    }
  } catch (const engine::Error&) {
  }
  return 0;
}
