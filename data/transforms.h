// Image decoding and the CUB/CARS/SOP transforms, two recipes:
//   robrank (docs/architecture.md; robrank's getTransform), the default:
//     train: resize to 256x256 (bilinear) -> random 224x224 crop -> horizontal flip with p = 0.5
//     test:  resize to 256x256 (bilinear) -> center 224x224 crop
//   revisiting (Roth et al.'s "Revisiting DML" code, which MDProp's code and paper use):
//     train: torchvision's RandomResizedCrop(224) (area 8-100 %, aspect 3/4-4/3) -> flip, p = 0.5
//     test:  resize the shorter side to 256 (aspect kept) -> center 224x224 crop
// Images are f32 [C, H, W] CPU tensors with values in [0, 1].
//
// Resize is PIL's bilinear filter, which torchvision's Resize applies to PIL images: a separable
// triangle filter whose support widens by the scale factor when shrinking (antialiasing), with
// pixel centers at i + 0.5. For enlarging it is plain bilinear interpolation with edge clamping;
// for an unchanged size it is the identity. (PIL rounds to 8 bits after each pass; we keep f32.)
#pragma once

#include <cstdint>
#include <string>

#include "engine/random.h"
#include "engine/tensor.h"

namespace data {

// Decodes a JPEG/PNG/BMP/... file with stb_image into RGB f32 [3, H, W] = byte / 255 (grey is
// replicated, alpha dropped). Missing, empty or undecodable files throw an engine::Error naming
// the file and stb_image's reason, and so do images whose header claims more than
// kMaxImagePixels (a corrupt header would otherwise make stb_image allocate gigabytes).
constexpr int64_t kMaxImagePixels = int64_t(1) << 26;  // 8192 x 8192; 67 MP photos still load
engine::Tensor decode_image(const std::string& path);

engine::Tensor resize_bilinear(const engine::Tensor& image, int64_t out_h, int64_t out_w);
engine::Tensor crop(const engine::Tensor& image, int64_t top, int64_t left, int64_t h, int64_t w);
engine::Tensor hflip(const engine::Tensor& image);
// torchvision's CenterCrop offsets: top = round((H - size) / 2), left likewise, rounding half to
// even as Python's round() does.
engine::Tensor center_crop(const engine::Tensor& image, int64_t size);

// The random part of the train transform, drawn from one Philox block of `gen` (as torchvision's
// RandomCrop and RandomHorizontalFlip): top uniform in [0, H - size], left uniform in
// [0, W - size], flip iff a uniform [0, 1) draw is < 0.5.
struct CropFlip {
  int64_t top = 0;
  int64_t left = 0;
  bool flip = false;
};
CropFlip draw_crop_flip(int64_t height, int64_t width, int64_t size, engine::Generator& gen);
engine::Tensor random_crop_flip(const engine::Tensor& image, int64_t size, engine::Generator& gen);

// torchvision's Resize(size) with an int: the shorter side becomes `size`, the longer one
// int(size * long / short) (truncated, as torchvision), bilinear as resize_bilinear.
engine::Tensor resize_shorter_side(const engine::Tensor& image, int64_t size);

// torchvision's RandomResizedCrop.get_params (scale (0.08, 1), ratio (3/4, 4/3)) and a flip coin:
// up to 10 tries of area fraction s ~ U(0.08, 1) and log aspect ~ U(log 3/4, log 4/3), w =
// round(sqrt(s A r)), h = round(sqrt(s A / r)) (half to even); the first that fits gets top ~
// U{0..H-h}, left ~ U{0..W-w}; if none fits, the centered crop of the whole image with its aspect
// clamped to [3/4, 4/3]. Always draws 11 Philox blocks of `gen` (try t uses block t's four
// words; block 10's first word is the flip coin), so the stream advances by the same amount
// whatever the image.
struct ResizedCropFlip {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool flip = false;
};
ResizedCropFlip draw_resized_crop_flip(int64_t height, int64_t width, engine::Generator& gen);
// The drawn window, resized (bilinear) to size x size, flipped iff drawn.
engine::Tensor random_resized_crop_flip(const engine::Tensor& image, int64_t size,
                                        engine::Generator& gen);

enum class TransformRecipe { Robrank, Revisiting };
// "robrank" or "revisiting"; anything else throws engine::Error listing both.
TransformRecipe parse_transform_recipe(const std::string& name);

struct ImageTransform {
  int64_t resize = 256;  // robrank: both sides; revisiting: the shorter side; 0 = keep the size
  int64_t crop = 224;
  bool train = false;  // the training transform (random) or the evaluation one (center crop)
  TransformRecipe recipe = TransformRecipe::Robrank;

  engine::Tensor apply(const engine::Tensor& image, engine::Generator& gen) const;
};

}  // namespace data
