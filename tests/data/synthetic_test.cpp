// The synthetic data set (data/synthetic.h): its spec keys and their errors, shapes, balanced
// labels, and pixels against values worked outside the code (splitmix64 by its published
// definition: splitmix64(0) = 0xe220a8397b1dcdaf, the first output of a generator seeded 0).
#include <catch2/catch.hpp>

#include <string>

#include "data/dataset.h"
#include "data/synthetic.h"
#include "engine/random.h"

using Catch::Contains;

TEST_CASE("synthetic: spec keys, defaults and errors naming the key", "[data]") {
  const data::SyntheticSpec d = data::parse_synthetic_spec("");
  CHECK(d.channels == 3);
  CHECK(d.size == 32);
  CHECK(d.classes == 10);
  CHECK(d.images == 200);
  CHECK(d.seed == 0);
  const data::SyntheticSpec s =
      data::parse_synthetic_spec("channels=3,size=224,classes=56,images=112,seed=7");
  CHECK(s.size == 224);
  CHECK(s.classes == 56);
  CHECK(s.images == 112);
  CHECK(s.seed == 7);
  REQUIRE_THROWS_WITH(data::parse_synthetic_spec("colour=3"),
                      Contains("unknown data.root key 'colour'") && Contains("channels"));
  REQUIRE_THROWS_WITH(data::parse_synthetic_spec("size=big"),
                      Contains("key 'size'") && Contains("'big'"));
  REQUIRE_THROWS_WITH(data::parse_synthetic_spec("size=0"), Contains("key 'size'"));
  REQUIRE_THROWS_WITH(data::parse_synthetic_spec("size"), Contains("'size' is not key=value"));
  REQUIRE_THROWS_WITH(data::parse_synthetic_spec("classes=3,images=4"),
                      Contains("multiple of classes"));
  REQUIRE_THROWS_WITH(data::parse_synthetic_spec("classes=4,images=4"),
                      Contains("at least 2 images per class"));
  REQUIRE_THROWS_WITH(data::open_dataset("synthetic", "train", "channels=x"),
                      Contains("key 'channels'"));
}

TEST_CASE("synthetic: shapes, balanced labels, deterministic pixels worked by hand", "[data]") {
  CHECK(engine::splitmix64(0) == 0xe220a8397b1dcdafull);
  const std::string root = "channels=1,size=2,classes=2,images=4,seed=1";
  auto train = data::open_dataset("synthetic", "train", root);
  auto test = data::open_dataset("synthetic", "test", root);
  CHECK(train->name() == "synthetic");
  CHECK(train->size() == 4);
  CHECK(train->num_classes() == 2);
  CHECK(train->image_shape() == engine::Shape{1, 2, 2});
  CHECK(train->labels() == std::vector<int64_t>{0, 1, 0, 1});
  CHECK(test->labels() == std::vector<int64_t>{0, 1, 0, 1});

  // Pixel k of image i, split s: splitmix64(1 * 2^32 + s * 2^31 + 4 i + k) >> 40, over 2^24.
  // train i=0 k=0: splitmix64(0x100000000) = 0xc42c5a1aa3820138 -> 0xc42c5a = 12856410
  // train i=1 k=3: splitmix64(0x100000007) = 0x27cf1707c6e1d01f -> 0x27cf17 = 2608919
  // test  i=0 k=0: splitmix64(0x180000000) = 0x5579b1b7af2459af -> 0x5579b1 = 5601713
  engine::Generator gen(123);
  const engine::Tensor a = train->image(0, gen);
  const engine::Tensor b = train->image(1, gen);
  const engine::Tensor t = test->image(0, gen);
  REQUIRE(a.shape() == engine::Shape{1, 2, 2});
  CHECK(a.data<float>()[0] == 12856410.0f / 16777216.0f);
  CHECK(b.data<float>()[3] == 2608919.0f / 16777216.0f);
  CHECK(t.data<float>()[0] == 5601713.0f / 16777216.0f);

  // The generator is not used: another generator, another dataset object, the same bits.
  engine::Generator other(9);
  const engine::Tensor again = data::open_dataset("synthetic", "train", root)->image(1, other);
  for (int k = 0; k < 4; ++k) CHECK(again.data<float>()[k] == b.data<float>()[k]);
  REQUIRE_THROWS_WITH(train->image(4, gen), Contains("out of range"));

  const auto summary = data::describe_dataset("synthetic", root);
  REQUIRE(summary.size() == 2);
  CHECK(summary[1].split == "test");
  CHECK(summary[1].size == 4);
  CHECK(summary[1].num_classes == 2);
}
