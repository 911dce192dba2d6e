// Fashion-MNIST from the Debian package dataset-fashion-mnist (docs/architecture.md; issue 4
// acceptance): 60,000 / 10,000 images, 10 classes, pixels in [0, 1], first training label 9.
// Skipped, with a visible warning, where the package is not installed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/mnist.h"

namespace {

bool package_installed() {
  std::error_code ec;
  return std::filesystem::is_regular_file(
      std::string(data::kFashionMnistDefaultRoot) + "/train-images-idx3-ubyte.gz", ec);
}

}  // namespace

TEST_CASE("fashion-mnist: the Debian package's train and test splits", "[data]") {
  if (!package_installed()) {
    WARN("skipped: dataset-fashion-mnist is not installed (no " << data::kFashionMnistDefaultRoot
                                                                << ")");
    return;
  }
  // The default root is the package's folder; no root argument needed.
  const std::unique_ptr<data::Dataset> train = data::open_dataset("fashion-mnist", "train");
  CHECK(train->size() == 60000);
  CHECK(train->num_classes() == 10);
  CHECK(train->image_shape() == engine::Shape{1, 28, 28});
  CHECK(train->label(0) == 9);  // the first training image is an ankle boot
  // Fashion-MNIST is balanced: 6,000 training images per class.
  std::vector<int64_t> counts(10, 0);
  for (int64_t label : train->labels()) counts[static_cast<std::size_t>(label)] += 1;
  CHECK(counts == std::vector<int64_t>(10, 6000));

  const auto* mnist = dynamic_cast<const data::MnistDataset*>(train.get());
  REQUIRE(mnist != nullptr);
  const engine::Tensor& all = mnist->images();
  CHECK(all.shape() == engine::Shape{60000, 1, 28, 28});
  const float* p = all.data<float>();
  const auto [lo, hi] = std::minmax_element(p, p + all.numel());
  CHECK(*lo == 0.0f);  // bytes 0 and 255 both occur: the range is exactly [0, 1]
  CHECK(*hi == 1.0f);

  const std::unique_ptr<data::Dataset> test_split = data::open_dataset("fashion-mnist", "test");
  CHECK(test_split->size() == 10000);
  CHECK(test_split->num_classes() == 10);
}

TEST_CASE("fashion-mnist: describe reads the split sizes without the pixels", "[data]") {
  if (!package_installed()) {
    WARN("skipped: dataset-fashion-mnist is not installed");
    return;
  }
  const std::vector<data::SplitSummary> s = data::describe_dataset("fashion-mnist");
  REQUIRE(s.size() == 2);
  CHECK(s[0].split == "train");
  CHECK(s[0].size == 60000);
  CHECK(s[0].num_classes == 10);
  CHECK(s[1].split == "test");
  CHECK(s[1].size == 10000);
  CHECK(s[1].last_class_id == 9);
}
