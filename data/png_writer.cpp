// PNG output (header: data/png_writer.h).
#include "data/png_writer.h"

#include <stb/stb_image_write.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/check.h"

namespace data {

void write_png(const std::string& path, const engine::Tensor& image) {
  ENGINE_CHECK(image.dim() == 3 && (image.size(0) == 1 || image.size(0) == 3), path,
               ": write_png needs a [1|3, H, W] image, got ", image.str());
  const int64_t channels = image.size(0), height = image.size(1), width = image.size(2);
  const std::vector<double> values = image.contiguous().to_vector();
  // CHW floats -> HWC bytes.
  std::vector<unsigned char> bytes(static_cast<size_t>(channels * height * width));
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < height * width; ++i) {
      const double v = std::clamp(values[static_cast<size_t>(c * height * width + i)], 0.0, 1.0);
      bytes[static_cast<size_t>(i * channels + c)] =
          static_cast<unsigned char>(std::lround(255.0 * (std::isnan(v) ? 0.0 : v)));
    }
  }
  const int ok =
      stbi_write_png(path.c_str(), static_cast<int>(width), static_cast<int>(height),
                     static_cast<int>(channels), bytes.data(), static_cast<int>(width * channels));
  ENGINE_CHECK(ok != 0, path, ": cannot write PNG file");
}

}  // namespace data
