// The prefetching loader: batches identical (to the bit) for any number of workers and any
// prefetch depth, equal to the synchronous reference, resumable mid-epoch, errors delivered with
// the batch they belong to.
#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "kernels/common/check.h"

using Catch::Contains;

namespace {

// Image i is [1, 2, 3] = i + a uniform [0, 1) draw from the sample's generator per pixel, so
// the pixels show both which index was loaded and which generator it got. Label i % 3. Index
// `bad` throws, as an undecodable file would.
class NoisyDataset : public data::Dataset {
 public:
  explicit NoisyDataset(int64_t n, int64_t bad = -1) : n_(n), bad_(bad) {}
  std::string name() const override { return "noisy"; }
  std::string split() const override { return "train"; }
  int64_t size() const override { return n_; }
  int64_t num_classes() const override { return 3; }
  int64_t label(int64_t index) const override { return index % 3; }
  engine::Tensor image(int64_t index, engine::Generator& gen) const override {
    calls_++;
    if (index == bad_) engine::fail("noisy: cannot decode image ", index);
    engine::Tensor noise = engine::uniform({1, 2, 3}, 0.0, 1.0, gen);
    float* p = noise.data<float>();
    for (int k = 0; k < 6; ++k) p[k] += static_cast<float>(index);
    return noise;
  }
  engine::Shape image_shape() const override { return {1, 2, 3}; }
  mutable std::atomic<int> calls_{0};

 private:
  int64_t n_, bad_;
};

struct Loaded {
  std::vector<int64_t> numbers;
  std::vector<std::vector<double>> images;
  std::vector<std::vector<int64_t>> labels;
};

Loaded run(const data::Dataset& dataset, const std::vector<std::vector<int64_t>>& batches,
           data::LoaderOptions options) {
  data::BatchLoader loader(dataset, batches, options);
  Loaded out;
  data::Batch b;
  while (loader.next(b)) {
    out.numbers.push_back(b.number);
    out.images.push_back(b.images.to_vector());
    out.labels.push_back(b.labels.to_indices());
  }
  return out;
}

}  // namespace

TEST_CASE("loader: shapes, labels and order of a sequential pass", "[data]") {
  NoisyDataset dataset(10);
  const auto batches = data::sequential_batches(10, 4);  // sizes 4, 4, 2
  data::BatchLoader loader(dataset, batches, {});
  CHECK(loader.size() == 3);
  data::Batch b;
  REQUIRE(loader.next(b));
  CHECK(b.number == 0);
  CHECK(b.images.shape() == engine::Shape{4, 1, 2, 3});
  CHECK(b.labels.dtype() == engine::DType::I64);
  CHECK(b.labels.to_indices() == std::vector<int64_t>{0, 1, 2, 0});
  // Pixel values are index + [0, 1): image 3 of the batch (index 3) lies in [3, 4).
  const std::vector<double> px = b.images.to_vector();
  for (int k = 18; k < 24; ++k) {
    CHECK(px[k] >= 3.0);
    CHECK(px[k] < 4.0);
  }
  REQUIRE(loader.next(b));
  REQUIRE(loader.next(b));
  CHECK(b.images.shape() == engine::Shape{2, 1, 2, 3});
  CHECK(b.indices == std::vector<int64_t>{8, 9});
  CHECK_FALSE(loader.next(b));
}

TEST_CASE("loader: output is identical for 0, 1, 2 and 5 workers and any prefetch", "[data]") {
  NoisyDataset dataset(40);
  data::Spc2Sampler sampler(dataset.labels(), 3, /*seed=*/11);
  std::vector<std::vector<int64_t>> batches;
  for (int64_t k = 0; k < sampler.batches_per_epoch(); ++k) batches.push_back(sampler.batch(2, k));

  data::LoaderOptions options;
  options.seed = 99;
  options.epoch = 2;
  options.num_workers = 0;
  const Loaded reference = run(dataset, batches, options);
  REQUIRE(reference.images.size() == batches.size());
  for (int workers : {1, 2, 5}) {
    for (int prefetch : {1, 3, 16}) {
      options.num_workers = workers;
      options.prefetch = prefetch;
      const Loaded got = run(dataset, batches, options);
      CHECK(got.numbers == reference.numbers);
      CHECK(got.images == reference.images);
      CHECK(got.labels == reference.labels);
    }
  }
  // And equal to load_batch, batch by batch.
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const data::Batch b = data::load_batch(dataset, batches[k], 99, 2, static_cast<int64_t>(k));
    CHECK(b.images.to_vector() == reference.images[k]);
  }
}

TEST_CASE("loader: pixels depend on seed and epoch, a resumed epoch gets the same pixels",
          "[data]") {
  NoisyDataset dataset(12);
  const auto batches = data::sequential_batches(12, 4);
  data::LoaderOptions options;
  options.seed = 5;
  options.epoch = 1;
  const Loaded full = run(dataset, batches, options);

  options.first_batch = 1;  // resume: batches 1 and 2 only
  const Loaded rest = run(dataset, {batches[1], batches[2]}, options);
  CHECK(rest.numbers == std::vector<int64_t>{1, 2});
  CHECK(rest.images[0] == full.images[1]);
  CHECK(rest.images[1] == full.images[2]);

  options.first_batch = 0;
  options.seed = 6;
  CHECK(run(dataset, batches, options).images[0] != full.images[0]);
  options.seed = 5;
  options.epoch = 2;
  CHECK(run(dataset, batches, options).images[0] != full.images[0]);
  // The same index in two slots of one batch gets two different draws.
  const data::Batch twice = data::load_batch(dataset, {4, 4}, 5, 1, 0);
  const std::vector<double> v = twice.images.to_vector();
  CHECK(std::vector<double>(v.begin(), v.begin() + 6) !=
        std::vector<double>(v.begin() + 6, v.end()));
}

TEST_CASE("loader: a rank decodes only its rows, each with the bytes of the whole batch's row",
          "[data]") {
  // Rank 1 of 2 takes rows 4-7 of a batch of 8 (indices 10..17): only those 4 images are
  // decoded, every row keeps its index and label, and row 5 (index 15) has the pixels of row 5
  // of the batch one process loads whole, since a row's generator depends on its slot alone.
  const std::vector<int64_t> indices = {10, 11, 12, 13, 14, 15, 16, 17};
  for (int workers : {0, 2}) {
    NoisyDataset dataset(20);
    data::LoaderOptions options;
    options.seed = 3;
    options.epoch = 1;
    options.first_batch = 2;
    options.num_workers = workers;
    options.decoded_rows = [](int64_t batch_size) {
      CHECK(batch_size == 8);
      return data::RowRange{4, 8};
    };
    data::BatchLoader loader(dataset, {indices}, options);
    data::Batch part;
    REQUIRE(loader.next(part));
    CHECK(dataset.calls_.load() == 4);
    CHECK(part.size() == 8);
    CHECK(part.first_row == 4);
    CHECK(part.indices == indices);
    CHECK(part.images.shape() == engine::Shape{4, 1, 2, 3});
    CHECK(part.labels.to_indices() == std::vector<int64_t>{1, 2, 0, 1, 2, 0, 1, 2});

    const data::Batch whole = data::load_batch(dataset, indices, 3, 1, 2);
    CHECK(dataset.calls_.load() == 4 + 8);
    const std::vector<double> all = whole.images.to_vector();
    const std::vector<double> row_5 = part.image_rows(5, 6).to_vector();
    CHECK(row_5 == std::vector<double>(all.begin() + 5 * 6, all.begin() + 6 * 6));
    for (double px : row_5) {
      CHECK(px >= 15.0);
      CHECK(px < 16.0);
    }
    CHECK(part.image_rows(4, 8).to_vector() == std::vector<double>(all.begin() + 4 * 6, all.end()));
    CHECK_THROWS_WITH(part.image_rows(3, 5),
                      Contains("rows 3..5 of batch 2 were not decoded") && Contains("rows 4..8"));
  }
  NoisyDataset dataset(20);
  CHECK_THROWS_WITH(data::load_batch(dataset, indices, 3, 1, 2, data::RowRange{6, 9}),
                    Contains("rows 6..9 to decode are not within batch 2's 8 rows"));
  // Without a selection, every row is decoded and image_rows reads any of them.
  const data::Batch whole = data::load_batch(dataset, indices, 3, 1, 2);
  CHECK(whole.first_row == 0);
  CHECK(whole.image_rows(0, 8).shape() == engine::Shape{8, 1, 2, 3});
}

TEST_CASE("loader errors: a failing image is rethrown with its batch, others still load",
          "[data]") {
  NoisyDataset dataset(9, /*bad=*/4);
  const auto batches = data::sequential_batches(9, 3);  // index 4 is in batch 1
  for (int workers : {0, 3}) {
    data::LoaderOptions options;
    options.num_workers = workers;
    data::BatchLoader loader(dataset, batches, options);
    data::Batch b;
    REQUIRE(loader.next(b));
    CHECK(b.number == 0);
    REQUIRE_THROWS_WITH(loader.next(b), Contains("cannot decode image 4"));
    REQUIRE(loader.next(b));
    CHECK(b.number == 2);
    CHECK_FALSE(loader.next(b));
  }
  // Out-of-range indices are named with the batch.
  NoisyDataset small(3);
  data::BatchLoader loader(small, {{0, 7}}, {});
  data::Batch b;
  REQUIRE_THROWS_WITH(loader.next(b), Contains("index 7") && Contains("noisy"));
}

TEST_CASE("loader: prefetch bounds the work ahead, destruction mid-epoch does not hang", "[data]") {
  NoisyDataset dataset(100);
  const auto batches = data::sequential_batches(100, 1);
  {
    data::LoaderOptions options;
    options.num_workers = 4;
    options.prefetch = 2;
    data::BatchLoader loader(dataset, batches, options);
    data::Batch b;
    REQUIRE(loader.next(b));
    // Workers may only have claimed batches 0..2 (consumed 1 + prefetch 2); the rest wait.
  }
  CHECK(dataset.calls_.load() <= 3);
}
