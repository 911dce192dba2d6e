// MNIST and Fashion-MNIST (docs/architecture.md): 28x28 grey images from IDX files, kept in memory
// as f32 [N, 1, 28, 28] with values pixel / 255 in [0, 1]. No normalization and no augmentation, as
// robrank (robrank datasets/mnist.py), so image() ignores its generator.
//
// Files, for split "train" (prefix "train") or "test" (prefix "t10k"):
//   <prefix>-images-idx3-ubyte[.gz]   u8 [N, H, W]
//   <prefix>-labels-idx1-ubyte[.gz]   u8 [N], values 0..9
// looked up, in order, in <root>, <root>/raw and <root>/<Folder>/raw (torchvision's layout, with
// <Folder> = "FashionMNIST" or "MNIST"); for each directory the .gz name is tried first. The
// Fashion-MNIST default root is the Debian package's /usr/share/datasets/fashion-mnist.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace data {

inline constexpr const char* kFashionMnistDefaultRoot = "/usr/share/datasets/fashion-mnist";

struct MnistFiles {
  std::string images;
  std::string labels;
};

// `name` is "mnist" or "fashion-mnist"; `split` "train" or "test". Throws naming the files
// looked for when none is found.
MnistFiles find_mnist_files(const std::string& name, const std::string& split,
                            const std::string& root);

class MnistDataset : public Dataset {
 public:
  // Reads and validates both files (label count = image count, labels in 0..9).
  static std::unique_ptr<MnistDataset> open(const std::string& name, const std::string& split,
                                            const std::string& root);
  MnistDataset(std::string name, std::string split, engine::Tensor images,
               std::vector<int64_t> labels);

  std::string name() const override { return name_; }
  std::string split() const override { return split_; }
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  int64_t num_classes() const override { return 10; }
  int64_t label(int64_t index) const override;
  engine::Tensor image(int64_t index, engine::Generator& gen) const override;
  engine::Shape image_shape() const override;

  // Every image at once, f32 [N, 1, H, W] (a view of the data set's memory: do not modify).
  const engine::Tensor& images() const { return images_; }

 private:
  std::string name_, split_;
  engine::Tensor images_;
  std::vector<int64_t> labels_;
};

// Split sizes from the label files and the image headers, without reading the pixels.
std::vector<SplitSummary> describe_mnist(const std::string& name, const std::string& root);

}  // namespace data
