// SPC-2 (robrank's layout and positive rule) and M-per-class samplers: layout, labels, seeding,
// and resuming from a state saved mid-epoch (through its JSON form).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "data/sampler.h"

using Catch::Contains;

namespace {

// 10 samples: class 0 = {0, 3, 6, 9}, class 1 = {1, 4, 7}, class 2 = {2, 5, 8}.
std::vector<int64_t> mod3_labels(int64_t n) {
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) labels.push_back(i % 3);
  return labels;
}

}  // namespace

TEST_CASE("spc2: batches are [a0, p0, a1, p1, ...] with equal labels per pair", "[data]") {
  const std::vector<int64_t> labels = mod3_labels(10);
  data::Spc2Sampler sampler(labels, /*pairs=*/4, /*seed=*/1);
  CHECK(sampler.batch_size() == 8);
  CHECK(sampler.batches_per_epoch() == 3);  // 4 + 4 + 2 pairs: the last batch is kept
  std::vector<int64_t> anchors;
  for (int64_t k = 0; k < 3; ++k) {
    const std::vector<int64_t> b = sampler.batch(0, k);
    CHECK(b.size() == (k < 2 ? 8u : 4u));
    for (std::size_t i = 0; i < b.size(); i += 2) {
      CHECK(labels[b[i]] == labels[b[i + 1]]);
      anchors.push_back(b[i]);
    }
  }
  // Every image is an anchor exactly once per epoch, in a shuffled order.
  std::vector<int64_t> sorted = anchors;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(anchors != sorted);

  data::Spc2Sampler dropping(labels, 4, 1, /*drop_last=*/true);
  CHECK(dropping.batches_per_epoch() == 2);
}

TEST_CASE("spc2: the positive is drawn from ALL same-class indices, the anchor included",
          "[data]") {
  // Class 0 = {0} alone: its positive can only be the anchor itself. Class 1 = {1, 2}: over many
  // epochs the positive of anchor 1 is sometimes 1 (itself) and sometimes 2.
  const std::vector<int64_t> labels = {0, 1, 1};
  data::Spc2Sampler sampler(labels, 3, 42);
  std::set<int64_t> partners_of_1;
  for (int64_t epoch = 0; epoch < 50; ++epoch) {
    const std::vector<int64_t> b = sampler.batch(epoch, 0);
    for (std::size_t i = 0; i < b.size(); i += 2) {
      if (b[i] == 0) CHECK(b[i + 1] == 0);
      if (b[i] == 1) partners_of_1.insert(b[i + 1]);
    }
  }
  CHECK(partners_of_1 == std::set<int64_t>{1, 2});
}

TEST_CASE("spc2: same seed -> same batches, other seed or epoch -> different", "[data]") {
  const std::vector<int64_t> labels = mod3_labels(60);
  data::Spc2Sampler a(labels, 8, 7), b(labels, 8, 7), c(labels, 8, 8);
  CHECK(a.batch(0, 0) == b.batch(0, 0));
  CHECK(a.batch(3, 5) == b.batch(3, 5));
  CHECK(a.batch(0, 0) != c.batch(0, 0));
  CHECK(a.batch(0, 0) != a.batch(1, 0));
  for (int i = 0; i < 20; ++i) CHECK(a.next() == b.next());
}

TEST_CASE("spc2: a state saved mid-epoch (as JSON) resumes into exactly the remaining batches",
          "[data]") {
  const std::vector<int64_t> labels = mod3_labels(50);
  data::Spc2Sampler original(labels, 8, 123);  // 7 batches per epoch
  REQUIRE(original.batches_per_epoch() == 7);
  for (int i = 0; i < 10; ++i) original.next();  // epoch 1, batch 3
  const data::SamplerState saved = original.state();
  CHECK(saved.epoch == 1);
  CHECK(saved.batch == 3);
  const std::string text = data::to_json(saved).dump();

  std::vector<std::vector<int64_t>> expected;
  for (int i = 0; i < 12; ++i) expected.push_back(original.next());  // across the epoch end

  data::Spc2Sampler resumed(labels, 8, /*seed: replaced by the state*/ 0);
  resumed.restore(data::sampler_state_from_json(nlohmann::json::parse(text)));
  CHECK(resumed.rest_of_epoch() ==
        std::vector<std::vector<int64_t>>(expected.begin(), expected.begin() + 4));
  for (int i = 0; i < 12; ++i) CHECK(resumed.next() == expected[static_cast<std::size_t>(i)]);
  CHECK(resumed.state().epoch == original.state().epoch);
  CHECK(resumed.state().batch == original.state().batch);
}

TEST_CASE("sampler state errors: wrong kind, other data, malformed JSON", "[data]") {
  data::Spc2Sampler spc2(mod3_labels(20), 4, 1);
  data::MPerClassSampler mpc(mod3_labels(20), 2, 2, 1);
  REQUIRE_THROWS_WITH(spc2.restore(mpc.state()), Contains("m_per_class") && Contains("spc2"));
  data::SamplerState other = data::Spc2Sampler(mod3_labels(21), 4, 1).state();
  REQUIRE_THROWS_WITH(spc2.restore(other), Contains("21 samples"));
  data::SamplerState past_end = spc2.state();
  past_end.batch = 5;
  REQUIRE_THROWS_WITH(spc2.restore(past_end), Contains("batch 5"));
  nlohmann::json json = data::to_json(spc2.state());
  json.erase("epoch");
  REQUIRE_THROWS_WITH(data::sampler_state_from_json(json), Contains("'epoch'"));
  json["epoch"] = "one";
  REQUIRE_THROWS_WITH(data::sampler_state_from_json(json), Contains("'epoch'"));
  REQUIRE_THROWS_WITH(data::Spc2Sampler({0, 1}, 0, 1), Contains("pairs per batch"));
  REQUIRE_THROWS_WITH(data::Spc2Sampler({0, -1}, 1, 1), Contains("negative label"));
}

TEST_CASE("m-per-class: C distinct classes x m images, distinct within a class when possible",
          "[data]") {
  // Class sizes: 0 -> 4, 1 -> 4, 2 -> 4, 3 -> 1, 4 -> 6 (19 samples).
  std::vector<int64_t> labels;
  for (int64_t c : {0, 1, 2, 4}) {
    for (int k = 0; k < (c == 4 ? 6 : 4); ++k) labels.push_back(c);
  }
  labels.push_back(3);
  data::MPerClassSampler sampler(labels, /*classes=*/2, /*m=*/3, /*seed=*/9);
  CHECK(sampler.batch_size() == 6);
  CHECK(sampler.batches_per_epoch() == 3);  // 19 / 6
  std::set<int64_t> classes_seen;
  for (int64_t epoch = 0; epoch < 10; ++epoch) {
    for (int64_t k = 0; k < 3; ++k) {
      const std::vector<int64_t> b = sampler.batch(epoch, k);
      REQUIRE(b.size() == 6);
      const int64_t c0 = labels[b[0]], c1 = labels[b[3]];
      CHECK(c0 != c1);
      for (int j = 0; j < 3; ++j) {
        CHECK(labels[b[j]] == c0);
        CHECK(labels[b[3 + j]] == c1);
      }
      for (int g = 0; g < 2; ++g) {
        const std::set<int64_t> group(b.begin() + 3 * g, b.begin() + 3 * g + 3);
        // Class 3 has one image: drawn three times. Others have >= 3: three distinct images.
        CHECK(group.size() == (labels[b[3 * g]] == 3 ? 1u : 3u));
        classes_seen.insert(labels[b[3 * g]]);
      }
    }
  }
  CHECK(classes_seen == std::set<int64_t>{0, 1, 2, 3, 4});
  REQUIRE_THROWS_WITH(data::MPerClassSampler(labels, 6, 2, 1), Contains("only 5 classes"));
}

TEST_CASE("m-per-class with replacement: classes and images drawn independently", "[data]") {
  // 5 classes of 4 images; 4 class slots of 3 images. Without replacement a batch never repeats a
  // class or an image; with it, over 200 batches, repeats of both occur, the layout holds, and
  // every class and every image turns up.
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < 20; ++i) labels.push_back(i % 5);
  data::MPerClassSampler sampler(labels, /*classes=*/4, /*m=*/3, /*seed=*/11,
                                 /*with_replacement=*/true);
  int64_t repeated_class = 0, repeated_image = 0;
  std::set<int64_t> images_seen;
  for (int64_t epoch = 0; epoch < 200; ++epoch) {
    const std::vector<int64_t> b = sampler.batch(epoch, 0);
    REQUIRE(b.size() == 12);
    std::set<int64_t> classes;
    for (int g = 0; g < 4; ++g) {
      const int64_t c = labels[b[3 * g]];
      for (int j = 0; j < 3; ++j) CHECK(labels[b[3 * g + j]] == c);
      const std::set<int64_t> group(b.begin() + 3 * g, b.begin() + 3 * g + 3);
      repeated_image += group.size() < 3;
      classes.insert(c);
    }
    repeated_class += classes.size() < 4;
    images_seen.insert(b.begin(), b.end());
  }
  // P(4 draws of 5 classes all distinct) = 5*4*3*2 / 5^4 = 0.19; P(3 draws of 4 images
  // distinct) = 4*3*2 / 4^3 = 0.375: both kinds of repeats are the rule, not rare.
  CHECK(repeated_class > 100);
  CHECK(repeated_image > 100);
  CHECK(images_seen.size() == 20);
  // More class slots than classes is allowed with replacement only.
  CHECK(data::MPerClassSampler(labels, 7, 2, 1, true).batch(0, 0).size() == 14);
  REQUIRE_THROWS_WITH(data::MPerClassSampler(labels, 7, 2, 1), Contains("only 5 classes"));
  // Without replacement the same sampler never repeats either.
  data::MPerClassSampler distinct(labels, 4, 3, 11);
  for (int64_t epoch = 0; epoch < 50; ++epoch) {
    const std::vector<int64_t> b = distinct.batch(epoch, 0);
    CHECK(std::set<int64_t>(b.begin(), b.end()).size() == 12);
  }
}

TEST_CASE("m-per-class: seeded and resumable like SPC-2", "[data]") {
  const std::vector<int64_t> labels = mod3_labels(30);
  data::MPerClassSampler a(labels, 3, 2, 5), b(labels, 3, 2, 5);
  CHECK(a.batch(2, 1) == b.batch(2, 1));
  CHECK(a.batch(2, 1) != data::MPerClassSampler(labels, 3, 2, 6).batch(2, 1));
  a.next();
  a.next();
  b.restore(data::sampler_state_from_json(data::to_json(a.state())));
  for (int i = 0; i < 8; ++i) CHECK(a.next() == b.next());
}

TEST_CASE("sequential batches: consecutive indices, last batch partial", "[data]") {
  const auto batches = data::sequential_batches(5, 2);
  CHECK(batches == std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}, {4}});
  CHECK(data::sequential_batches(0, 3).empty());
}
