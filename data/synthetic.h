// The synthetic data set, for benchmarks and tests only (docs/config.md): images of any size whose
// pixels come from a seeded generator, so `dml bench --train` can time a CUB-shaped step on a
// machine without any data set. It has no meaning to learn; its numbers measure speed only.
//
// data.name "synthetic"; data.root holds the shape as comma-separated key=value pairs, e.g.
//   "channels=3,size=224,classes=100,images=1120,seed=0"
// (every key optional; defaults channels 3, size 32, classes 10, images 200, seed 0).
// Image i of a split has label i % classes (balanced: images must be a multiple of classes, with
// at least 2 images per class, so SPC-2 batches can be drawn); its pixel k (flat C x H x W index)
// is the top 24 bits of splitmix64(seed * 2^32 + split * 2^31 + i * C*H*W + k) / 2^24, in [0, 1).
// The test split (split 1) has different pixels than the train split (split 0) and the same labels.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/dataset.h"

namespace data {

struct SyntheticSpec {
  int64_t channels = 3;
  int64_t size = 32;  // images are size x size
  int64_t classes = 10;
  int64_t images = 200;  // per split
  uint64_t seed = 0;
};

// Parses data.root's key=value list; an unknown key or a bad value throws engine::Error naming it.
SyntheticSpec parse_synthetic_spec(const std::string& root);

// The value of pixel `flat_index` of image `index` (definition above).
float synthetic_pixel(const SyntheticSpec& spec, int split_index, int64_t index,
                      int64_t flat_index);

class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(SyntheticSpec spec, std::string split);

  std::string name() const override { return "synthetic"; }
  std::string split() const override { return split_; }
  int64_t size() const override { return spec_.images; }
  int64_t num_classes() const override { return spec_.classes; }
  int64_t label(int64_t index) const override;
  // Deterministic: ignores its generator.
  engine::Tensor image(int64_t index, engine::Generator& gen) const override;
  engine::Shape image_shape() const override;

 private:
  SyntheticSpec spec_;
  std::string split_;
};

std::vector<SplitSummary> describe_synthetic(const std::string& root);

}  // namespace data
