// Image decoding (stb_image) and the resize/crop/flip transforms. See transforms.h.
#include "data/transforms.h"

#include <stb/stb_image.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/io/file_io.h"
#include "kernels/common/check.h"
#include "kernels/random/philox.h"

namespace data {

using engine::fail;
using engine::Tensor;

namespace {

// Checks for a CPU f32 [C, H, W] tensor and returns it contiguous.
Tensor checked_image(const Tensor& image, const char* op) {
  ENGINE_CHECK(image.defined() && image.dim() == 3 && image.dtype() == engine::DType::F32 &&
                   !image.device().is_cuda(),
               op, ": expected a CPU f32 [C, H, W] image, got ",
               image.defined() ? image.str() : std::string("an undefined tensor"));
  return image.contiguous();
}

// One output pixel of a 1-D resize: input pixels [first, first + weights.size()) and weights.
struct Taps {
  int64_t first = 0;
  std::vector<double> weights;
};

// PIL's bilinear (triangle) filter taps for resizing `in` pixels to `out` pixels. Output pixel i
// has its center at (i + 0.5) * scale in input coordinates; when shrinking (scale > 1) the
// filter is stretched by `scale`, so every input pixel contributes (antialiasing).
std::vector<Taps> triangle_taps(int64_t in, int64_t out) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the triangle's half-width 1, stretched
  std::vector<Taps> taps(static_cast<std::size_t>(out));
  for (int64_t i = 0; i < out; ++i) {
    const double center = (static_cast<double>(i) + 0.5) * scale;
    const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(center - support + 0.5));
    const int64_t hi = std::min<int64_t>(in, static_cast<int64_t>(center + support + 0.5));
    Taps& t = taps[static_cast<std::size_t>(i)];
    t.first = lo;
    double total = 0.0;
    for (int64_t x = lo; x < hi; ++x) {
      // Distance from the output center to input pixel x's center (x + 0.5), in filter units.
      const double d = std::abs((static_cast<double>(x) + 0.5 - center) / filter_scale);
      const double w = d < 1.0 ? 1.0 - d : 0.0;
      t.weights.push_back(w);
      total += w;
    }
    if (total > 0.0) {
      for (double& w : t.weights) w /= total;
    }
  }
  return taps;
}

}  // namespace

Tensor decode_image(const std::string& path) {
  engine::detail::InputFile file(path);  // names the file when missing or unreadable
  if (file.size() == 0) fail(path, ": cannot decode image: the file is empty");
  ENGINE_CHECK(file.size() < (uint64_t(1) << 31), path, ": cannot decode image: ", file.size(),
               " bytes is too large for stb_image");
  std::vector<unsigned char> bytes(static_cast<std::size_t>(file.size()));
  file.read_at(0, bytes.data(), bytes.size());

  // A corrupt header can claim up to 2^24 x 2^24 pixels and stb_image would then ask for
  // gigabytes before noticing the data is short. Read the header first and refuse anything
  // larger than kMaxImagePixels.
  int w = 0, h = 0, channels = 0;
  const int byte_count = static_cast<int>(bytes.size());
  if (stbi_info_from_memory(bytes.data(), byte_count, &w, &h, &channels) == 0) {
    fail(path, ": cannot decode image (stb_image: ", stbi_failure_reason(), ")");
  }
  if (int64_t(w) * int64_t(h) > kMaxImagePixels) {
    fail(path, ": cannot decode image: its header says ", w, "x", h, " pixels, more than the ",
         kMaxImagePixels, " this loader accepts");
  }
  unsigned char* pixels = stbi_load_from_memory(bytes.data(), byte_count, &w, &h, &channels, 3);
  if (pixels == nullptr) {
    fail(path, ": cannot decode image (stb_image: ", stbi_failure_reason(), ")");
  }
  // HWC bytes -> CHW floats. stb gives us RGB whatever the file held (grey, RGBA, ...).
  Tensor out = Tensor::empty({3, h, w});
  float* dst = out.data<float>();
  const int64_t plane = int64_t(h) * w;
  for (int64_t p = 0; p < plane; ++p) {
    for (int64_t c = 0; c < 3; ++c) {
      dst[c * plane + p] = static_cast<float>(pixels[p * 3 + c]) / 255.0f;
    }
  }
  stbi_image_free(pixels);
  return out;
}

Tensor resize_bilinear(const Tensor& image, int64_t out_h, int64_t out_w) {
  const Tensor in = checked_image(image, "resize_bilinear");
  const int64_t channels = in.size(0), in_h = in.size(1), in_w = in.size(2);
  ENGINE_CHECK(out_h > 0 && out_w > 0 && in_h > 0 && in_w > 0, "resize_bilinear: cannot resize ",
               in.str(), " to ", out_h, "x", out_w);
  const std::vector<Taps> cols = triangle_taps(in_w, out_w);
  const std::vector<Taps> rows = triangle_taps(in_h, out_h);

  // Pass 1, along x: [C, in_h, in_w] -> [C, in_h, out_w]; pass 2, along y: -> [C, out_h, out_w].
  std::vector<double> mid(static_cast<std::size_t>(channels * in_h * out_w));
  const float* src = in.data<float>();
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t y = 0; y < in_h; ++y) {
      const float* row = src + (c * in_h + y) * in_w;
      double* out_row = mid.data() + (c * in_h + y) * out_w;
      for (int64_t x = 0; x < out_w; ++x) {
        const Taps& t = cols[static_cast<std::size_t>(x)];
        double acc = 0.0;
        for (std::size_t k = 0; k < t.weights.size(); ++k) acc += t.weights[k] * row[t.first + k];
        out_row[x] = acc;
      }
    }
  }
  Tensor out = Tensor::empty({channels, out_h, out_w});
  float* dst = out.data<float>();
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t y = 0; y < out_h; ++y) {
      const Taps& t = rows[static_cast<std::size_t>(y)];
      float* out_row = dst + (c * out_h + y) * out_w;
      for (int64_t x = 0; x < out_w; ++x) {
        double acc = 0.0;
        for (std::size_t k = 0; k < t.weights.size(); ++k) {
          acc += t.weights[k] *
                 mid[static_cast<std::size_t>((c * in_h + t.first + int64_t(k)) * out_w + x)];
        }
        out_row[x] = static_cast<float>(acc);
      }
    }
  }
  return out;
}

Tensor crop(const Tensor& image, int64_t top, int64_t left, int64_t h, int64_t w) {
  const Tensor in = checked_image(image, "crop");
  const int64_t channels = in.size(0), in_h = in.size(1), in_w = in.size(2);
  ENGINE_CHECK(h > 0 && w > 0 && top >= 0 && left >= 0 && top + h <= in_h && left + w <= in_w,
               "crop: window ", h, "x", w, " at (", top, ", ", left, ") does not fit in ",
               in.str());
  Tensor out = Tensor::empty({channels, h, w});
  const float* src = in.data<float>();
  float* dst = out.data<float>();
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t y = 0; y < h; ++y) {
      std::memcpy(dst + (c * h + y) * w, src + (c * in_h + top + y) * in_w + left,
                  static_cast<std::size_t>(w) * sizeof(float));
    }
  }
  return out;
}

Tensor hflip(const Tensor& image) {
  const Tensor in = checked_image(image, "hflip");
  const int64_t rows = in.size(0) * in.size(1), w = in.size(2);
  Tensor out = Tensor::empty(in.shape());
  const float* src = in.data<float>();
  float* dst = out.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t x = 0; x < w; ++x) dst[r * w + x] = src[r * w + (w - 1 - x)];
  }
  return out;
}

Tensor center_crop(const Tensor& image, int64_t size) {
  const Tensor in = checked_image(image, "center_crop");
  ENGINE_CHECK(size > 0 && size <= in.size(1) && size <= in.size(2), "center_crop: size ", size,
               " does not fit in ", in.str());
  // std::nearbyint rounds half to even in the default rounding mode, like Python's round().
  const auto top = static_cast<int64_t>(std::nearbyint(double(in.size(1) - size) / 2.0));
  const auto left = static_cast<int64_t>(std::nearbyint(double(in.size(2) - size) / 2.0));
  return crop(in, top, left, size, size);
}

CropFlip draw_crop_flip(int64_t height, int64_t width, int64_t size, engine::Generator& gen) {
  ENGINE_CHECK(size > 0 && size <= height && size <= width, "random crop: size ", size,
               " does not fit in a ", height, "x", width, " image");
  // One Philox block: word 0 -> top, word 1 -> left (randint's scaling), word 2 -> the flip coin.
  const engine::kernels::PhiloxBlock block =
      engine::kernels::philox4x32_10(gen.take(1), 0, gen.seed);
  CropFlip out;
  out.top = static_cast<int64_t>((uint64_t(block.word[0]) * uint64_t(height - size + 1)) >> 32);
  out.left = static_cast<int64_t>((uint64_t(block.word[1]) * uint64_t(width - size + 1)) >> 32);
  out.flip = engine::kernels::philox_uniform01(block.word[2]) < 0.5f;
  return out;
}

Tensor random_crop_flip(const Tensor& image, int64_t size, engine::Generator& gen) {
  const Tensor in = checked_image(image, "random_crop_flip");
  const CropFlip draw = draw_crop_flip(in.size(1), in.size(2), size, gen);
  Tensor out = crop(in, draw.top, draw.left, size, size);
  return draw.flip ? hflip(out) : out;
}

Tensor resize_shorter_side(const Tensor& image, int64_t size) {
  const Tensor in = checked_image(image, "resize_shorter_side");
  ENGINE_CHECK(size > 0, "resize_shorter_side: size must be positive, got ", size);
  const int64_t h = in.size(1), w = in.size(2);
  const int64_t shorter = std::min(h, w), longer = std::max(h, w);
  const auto other = static_cast<int64_t>(double(size) * double(longer) / double(shorter));
  return h <= w ? resize_bilinear(in, size, other) : resize_bilinear(in, other, size);
}

ResizedCropFlip draw_resized_crop_flip(int64_t height, int64_t width, engine::Generator& gen) {
  ENGINE_CHECK(height > 0 && width > 0, "random resized crop: empty ", height, "x", width,
               " image");
  constexpr int kTries = 10;
  constexpr double kMinScale = 0.08, kMaxScale = 1.0;
  const double log_min_ratio = std::log(3.0 / 4.0), log_max_ratio = std::log(4.0 / 3.0);
  const uint64_t first = gen.take(kTries + 1);
  auto block = [&](int t) { return engine::kernels::philox4x32_10(first + t, 0, gen.seed); };
  auto below = [](uint32_t word, int64_t n) {  // uniform in {0, ..., n - 1}, as draw_crop_flip
    return static_cast<int64_t>((uint64_t(word) * uint64_t(n)) >> 32);
  };
  const double area = double(height) * double(width);
  ResizedCropFlip out;
  bool found = false;
  for (int t = 0; t < kTries && !found; ++t) {
    const engine::kernels::PhiloxBlock b = block(t);
    const double scale =
        kMinScale + (kMaxScale - kMinScale) * double(engine::kernels::philox_uniform01(b.word[0]));
    const double ratio =
        std::exp(log_min_ratio + (log_max_ratio - log_min_ratio) *
                                     double(engine::kernels::philox_uniform01(b.word[1])));
    // Python's round() is half to even, as std::nearbyint in the default rounding mode.
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(area * scale * ratio)));
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(area * scale / ratio)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      out = {below(b.word[2], height - h + 1), below(b.word[3], width - w + 1), h, w, false};
      found = true;
    }
  }
  if (!found) {  // the centered crop of the whole image, its aspect clamped to [3/4, 4/3]
    const double in_ratio = double(width) / double(height);
    int64_t w = width, h = height;
    if (in_ratio < 3.0 / 4.0) {
      h = static_cast<int64_t>(std::nearbyint(double(w) / (3.0 / 4.0)));
    } else if (in_ratio > 4.0 / 3.0) {
      w = static_cast<int64_t>(std::nearbyint(double(h) * (4.0 / 3.0)));
    }
    out = {(height - h) / 2, (width - w) / 2, h, w, false};
  }
  out.flip = engine::kernels::philox_uniform01(block(kTries).word[0]) < 0.5f;
  return out;
}

Tensor random_resized_crop_flip(const Tensor& image, int64_t size, engine::Generator& gen) {
  const Tensor in = checked_image(image, "random_resized_crop_flip");
  ENGINE_CHECK(size > 0, "random_resized_crop_flip: size must be positive, got ", size);
  const ResizedCropFlip d = draw_resized_crop_flip(in.size(1), in.size(2), gen);
  Tensor out = resize_bilinear(crop(in, d.top, d.left, d.height, d.width), size, size);
  return d.flip ? hflip(out) : out;
}

TransformRecipe parse_transform_recipe(const std::string& name) {
  if (name == "robrank") return TransformRecipe::Robrank;
  if (name == "revisiting") return TransformRecipe::Revisiting;
  engine::fail("unknown image transform '", name, "' (expected robrank or revisiting)");
}

Tensor ImageTransform::apply(const Tensor& image, engine::Generator& gen) const {
  if (recipe == TransformRecipe::Revisiting) {
    if (train) return random_resized_crop_flip(image, crop, gen);
    return center_crop(resize > 0 ? resize_shorter_side(image, resize) : image, crop);
  }
  const Tensor resized = resize > 0 ? resize_bilinear(image, resize, resize) : image;
  return train ? random_crop_flip(resized, crop, gen) : center_crop(resized, crop);
}

}  // namespace data
