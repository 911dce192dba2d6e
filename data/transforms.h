// Image decoding and the CUB/CARS/SOP transforms (SPEC §5; robrank's getTransform,
// research/robrank-spec.md §1.2):
//   train: resize to 256x256 (bilinear) -> random 224x224 crop -> horizontal flip with p = 0.5
//   test:  resize to 256x256 (bilinear) -> center 224x224 crop
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

struct ImageTransform {
  int64_t resize = 256;  // both sides; 0 = keep the decoded size
  int64_t crop = 224;
  bool train = false;  // random crop + flip (train) or center crop (test)

  engine::Tensor apply(const engine::Tensor& image, engine::Generator& gen) const;
};

}  // namespace data
