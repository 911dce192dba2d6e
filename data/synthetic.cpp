// The synthetic data set (data/synthetic.h).
#include "data/synthetic.h"

#include <cstdlib>
#include <sstream>
#include <utility>

#include "kernels/common/check.h"

namespace data {

using engine::fail;

namespace {

constexpr const char* kKeys = "channels, size, classes, images, seed";

int64_t parse_count(const std::string& key, const std::string& value, int64_t min, int64_t max) {
  char* end = nullptr;
  const long long parsed = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || parsed < min || parsed > max) {
    fail("synthetic data set: data.root key '", key, "' must be an integer in [", min, ", ", max,
         "], not '", value, "'");
  }
  return static_cast<int64_t>(parsed);
}

}  // namespace

SyntheticSpec parse_synthetic_spec(const std::string& root) {
  SyntheticSpec spec;
  std::stringstream items(root);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) {
      fail("synthetic data set: data.root item '", item, "' is not key=value (keys: ", kKeys, ")");
    }
    const std::string key = item.substr(0, eq);
    const std::string value = item.substr(eq + 1);
    if (key == "channels") {
      spec.channels = parse_count(key, value, 1, 4);
    } else if (key == "size") {
      spec.size = parse_count(key, value, 1, 4096);
    } else if (key == "classes") {
      spec.classes = parse_count(key, value, 1, 1000000);
    } else if (key == "images") {
      spec.images = parse_count(key, value, 1, 100000000);
    } else if (key == "seed") {
      spec.seed = static_cast<uint64_t>(parse_count(key, value, 0, 2147483647));
    } else {
      fail("synthetic data set: unknown data.root key '", key, "' (keys: ", kKeys, ")");
    }
  }
  if (spec.images % spec.classes != 0 || spec.images < 2 * spec.classes) {
    fail("synthetic data set: data.root images (", spec.images, ") must be a multiple of classes (",
         spec.classes, ") with at least 2 images per class");
  }
  return spec;
}

float synthetic_pixel(const SyntheticSpec& spec, int split_index, int64_t index,
                      int64_t flat_index) {
  const uint64_t per_image = static_cast<uint64_t>(spec.channels * spec.size * spec.size);
  const uint64_t counter = (spec.seed << 32) + (static_cast<uint64_t>(split_index) << 31) +
                           static_cast<uint64_t>(index) * per_image +
                           static_cast<uint64_t>(flat_index);
  // 24 bits are exact in a float, so the value does not depend on rounding.
  return static_cast<float>(engine::splitmix64(counter) >> 40) * (1.0f / 16777216.0f);
}

SyntheticDataset::SyntheticDataset(SyntheticSpec spec, std::string split)
    : spec_(spec), split_(std::move(split)) {}

int64_t SyntheticDataset::label(int64_t index) const {
  ENGINE_CHECK(index >= 0 && index < size(), "synthetic ", split_, ": image index ", index,
               " out of range [0, ", size(), ")");
  return index % spec_.classes;
}

engine::Tensor SyntheticDataset::image(int64_t index, engine::Generator& /*unused*/) const {
  ENGINE_CHECK(index >= 0 && index < size(), "synthetic ", split_, ": image index ", index,
               " out of range [0, ", size(), ")");
  engine::Tensor out = engine::Tensor::empty(image_shape());
  float* pixels = out.data<float>();
  const int split_index = split_ == "train" ? 0 : 1;
  const int64_t count = out.numel();
  for (int64_t k = 0; k < count; ++k) pixels[k] = synthetic_pixel(spec_, split_index, index, k);
  return out;
}

engine::Shape SyntheticDataset::image_shape() const {
  return {spec_.channels, spec_.size, spec_.size};
}

std::vector<SplitSummary> describe_synthetic(const std::string& root) {
  const SyntheticSpec spec = parse_synthetic_spec(root);
  std::vector<SplitSummary> out;
  for (const std::string split : {"train", "test"}) {
    SplitSummary s;
    s.split = split;
    s.size = spec.images;
    s.num_classes = spec.classes;
    s.first_class_id = 0;
    s.last_class_id = spec.classes - 1;
    out.push_back(s);
  }
  return out;
}

}  // namespace data
