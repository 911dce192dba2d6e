// Writing images as PNG files (stb_image_write, from Debian's libstb): what `dml attack -X` uses
// to dump original/adversarial pairs for inspection.
#pragma once

#include <string>

#include "engine/tensor.h"

namespace data {

// image: floating [C, H, W] with C = 1 (grey) or 3 (RGB), values in [0, 1] (clamped, rounded to
// 8 bits). Throws engine::Error naming the path if the shape is wrong or the file cannot be
// written.
void write_png(const std::string& path, const engine::Tensor& image);

}  // namespace data
