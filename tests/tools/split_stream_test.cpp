// tools/dml/split_stream.h: a split walked batch by batch gives the same images and embeddings as
// the whole split stacked, with only a few batches decoded at any time.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "kernels/common/check.h"
#include "models/embed.h"
#include "models/registry.h"
#include "tools/dml/split_stream.h"

namespace {

// A test split of `size` 1x28x28 images whose pixels are a function of the index; counts how many
// images it has decoded, and can fail on one index like an unreadable file.
class CountingDataset : public data::Dataset {
 public:
  explicit CountingDataset(int64_t size, int64_t bad_index = -1)
      : size_(size), bad_index_(bad_index) {}
  std::string name() const override { return "counting"; }
  std::string split() const override { return "test"; }
  int64_t size() const override { return size_; }
  int64_t num_classes() const override { return 3; }
  int64_t label(int64_t index) const override { return index % 3; }
  engine::Shape image_shape() const override { return {1, 28, 28}; }
  engine::Tensor image(int64_t index, engine::Generator&) const override {
    ENGINE_CHECK(index != bad_index_, "counting: image ", index, " is unreadable");
    ++decoded;
    std::vector<double> pixels(28 * 28);
    for (size_t p = 0; p < pixels.size(); ++p) {
      pixels[p] = static_cast<double>((index * 131 + static_cast<int64_t>(p) * 7) % 256) / 255.0;
    }
    return engine::Tensor::from_vector(pixels, {1, 28, 28});
  }
  mutable std::atomic<int64_t> decoded{0};

 private:
  int64_t size_, bad_index_;
};

engine::Tensor stacked(const data::Dataset& dataset, int64_t count) {
  engine::Tensor images = engine::Tensor::empty({count, 1, 28, 28});
  engine::Generator gen(0);
  for (int64_t i = 0; i < count; ++i) images.select(0, i).copy_(dataset.image(i, gen));
  return images;
}

}  // namespace

TEST_CASE("split_stream: batches come in order with the split's images, few decoded ahead",
          "[tools][split_stream]") {
  const CountingDataset dataset(53);
  const engine::Tensor expected = stacked(dataset, 50).contiguous();
  dataset.decoded = 0;
  std::vector<int64_t> begins;
  int64_t visited = 0, most_ahead = 0;
  dml::for_each_split_batch(dataset, 50, 8, [&](int64_t begin, const engine::Tensor& images) {
    begins.push_back(begin);
    REQUIRE(images.size(0) == (begin == 48 ? 2 : 8));
    CHECK(images.to_vector() == expected.slice(0, begin, begin + images.size(0)).to_vector());
    visited += images.size(0);
    most_ahead = std::max(most_ahead, dataset.decoded.load() - visited);
  });
  CHECK(begins == std::vector<int64_t>{0, 8, 16, 24, 32, 40, 48});
  CHECK(dataset.decoded == 50);  // the first 50 only, each once
  // Decoded but not yet visited: at most the loader's prefetch, 2 batches, never the split.
  CHECK(most_ahead <= 2 * 8);

  CHECK(dml::split_labels(dataset, 5) == std::vector<int64_t>{0, 1, 2, 0, 1});
  CHECK_THROWS_WITH(dml::split_labels(dataset, 54), Catch::Contains("54 images asked of counting"));
  CHECK_THROWS_WITH(dml::for_each_split_batch(dataset, 4, 0, [](int64_t, const engine::Tensor&) {}),
                    Catch::Contains("batch size must be positive"));
}

TEST_CASE("split_stream: an unreadable image stops the walk with its error",
          "[tools][split_stream]") {
  const CountingDataset dataset(40, /*bad_index=*/21);
  int64_t visited = 0;
  CHECK_THROWS_WITH(dml::for_each_split_batch(
                        dataset, 40, 8,
                        [&](int64_t, const engine::Tensor& images) { visited += images.size(0); }),
                    Catch::Contains("counting: image 21 is unreadable"));
  CHECK(visited == 16);  // the two batches before the bad one
}

TEST_CASE("split_stream: embed_split equals models::embed of the stacked split, bit for bit",
          "[tools][split_stream]") {
  const CountingDataset dataset(37);
  models::ModelConfig config;
  config.embedding_dim = 16;
  engine::Generator gen(5);
  auto model = models::build_model(config, gen);
  models::EmbedOptions options;
  options.batch_size = 10;
  const engine::Tensor expected = models::embed(*model, stacked(dataset, 33), options);
  std::vector<int64_t> progress;
  const engine::Tensor got =
      dml::embed_split(*model, dataset, 33, 10, [&](int64_t done, int64_t total) {
        CHECK(total == 33);
        progress.push_back(done);
      });
  REQUIRE(got.shape() == engine::Shape{33, 16});
  CHECK(got.to_vector() == expected.to_vector());
  CHECK(progress == std::vector<int64_t>{10, 20, 30, 33});
}
