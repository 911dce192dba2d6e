// The dataset interface every reader implements and every consumer (training, `dml embed`,
// `dml info`, attacks) uses. Images come out as f32 [C, H, W] tensors in [0, 1] after the split's
// transform (docs/architecture.md); labels are class indices in [0, num_classes) after remapping
// the dataset's own class ids (e.g. CUB test classes 101..200 -> 0..99).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/random.h"
#include "engine/tensor.h"

namespace data {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::string name() const = 0;   // "fashion-mnist", "cub200", ...
  virtual std::string split() const = 0;  // "train" or "test"
  virtual int64_t size() const = 0;
  virtual int64_t num_classes() const = 0;
  virtual int64_t label(int64_t index) const = 0;
  // Image `index` after the split's transform. Random transforms (train crops/flips) draw from
  // `gen`, so a batch's pixels depend only on the seed; deterministic ones ignore it.
  // Must be thread-safe: the prefetching loader (data/loader.h) calls it from worker threads.
  virtual engine::Tensor image(int64_t index, engine::Generator& gen) const = 0;
  // The shape image() returns, e.g. {1, 28, 28} or {3, 224, 224}.
  virtual engine::Shape image_shape() const = 0;
  std::vector<int64_t> labels() const;  // all labels in index order
};

struct SplitSummary {
  std::string split;
  int64_t size = 0;
  int64_t num_classes = 0;
  int64_t first_class_id = 0;  // the dataset's own id of class 0 (e.g. 101 for CUB test)
  int64_t last_class_id = 0;
};

// Datasets by name: "fashion-mnist" (default root: the Debian package's
// /usr/share/datasets/fashion-mnist), "mnist" (root required), "cub200", "cars196", "sop", and
// "synthetic" (benchmarks and tests only: root is its shape, data/synthetic.h).
// Throws engine::Error naming the missing file or directory when the data are not there.
// augment: the image datasets' training transform (random crop + horizontal flip, drawn from the
// generator image() is given), which only training asks for; otherwise the deterministic
// evaluation transform (center crop), on either split, as the papers' code evaluates. transform:
// the image datasets' recipe, "robrank" or "revisiting" (data/transforms.h). Fashion-MNIST and
// MNIST have no transform.
std::unique_ptr<Dataset> open_dataset(const std::string& name, const std::string& split,
                                      const std::string& root = "", bool augment = false,
                                      const std::string& transform = "robrank");
std::vector<SplitSummary> describe_dataset(const std::string& name, const std::string& root = "");
std::vector<std::string> dataset_names();
// One of dataset_names() (the canonical names; open_dataset also takes robrank's short ones).
bool is_dataset_name(const std::string& name);

}  // namespace data
