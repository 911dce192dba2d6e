// Image decoding and the resize / crop / flip transforms, against values worked out by hand.
#include <stb/stb_image_write.h>
#include <zlib.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "data/transforms.h"
#include "tests/io/io_test_util.h"

using Catch::Contains;
using engine::Tensor;

namespace {

// A [C, H, W] image with pixel (c, y, x) = (c * 65536 + y * 256 + x) / 2^20: exact in f32 and
// different everywhere, so any crop offset or flip shows.
Tensor coordinate_image(int64_t c, int64_t h, int64_t w) {
  std::vector<double> values;
  for (int64_t k = 0; k < c; ++k) {
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) values.push_back(double(k * 65536 + y * 256 + x) / 1048576.0);
    }
  }
  return Tensor::from_vector(values, {c, h, w});
}

double coordinate(int64_t c, int64_t y, int64_t x) {
  return double(c * 65536 + y * 256 + x) / 1048576.0;
}

double at(const Tensor& t, int64_t c, int64_t y, int64_t x) {
  return t.to_vector()[static_cast<std::size_t>((c * t.size(1) + y) * t.size(2) + x)];
}

}  // namespace

TEST_CASE("decode image: PNG bytes become RGB [3, H, W] = byte / 255", "[data]") {
  test::TempDir dir;
  // 2x1 RGB image: pixel (0,0) = (255, 0, 51), pixel (0,1) = (102, 153, 204).
  const std::vector<uint8_t> rgb = {255, 0, 51, 102, 153, 204};
  REQUIRE(stbi_write_png(dir.file("a.png").c_str(), 2, 1, 3, rgb.data(), 6) != 0);
  const Tensor x = data::decode_image(dir.file("a.png"));
  CHECK(x.shape() == engine::Shape{3, 1, 2});
  // CHW order: R plane (255, 102), G plane (0, 153), B plane (51, 204); /255 -> 1, .4, 0, .6, .2,
  // .8
  const std::vector<double> expected = {1.0, 0.4, 0.0, 0.6, 0.2, 0.8};
  const std::vector<double> got = x.to_vector();
  for (std::size_t i = 0; i < expected.size(); ++i)
    CHECK(got[i] == Approx(expected[i]).epsilon(1e-7));

  // A grey PNG is replicated into three channels.
  const std::vector<uint8_t> grey = {0, 255};
  REQUIRE(stbi_write_png(dir.file("g.png").c_str(), 1, 2, 1, grey.data(), 1) != 0);
  CHECK(data::decode_image(dir.file("g.png")).to_vector() == std::vector<double>{0, 1, 0, 1, 0, 1});

  // Alpha is dropped, not blended (PIL's convert('RGB')): RGBA and grey + alpha, alpha 0 or 17.
  const std::vector<uint8_t> rgba = {255, 0, 51, 0, 102, 153, 204, 17};
  REQUIRE(stbi_write_png(dir.file("rgba.png").c_str(), 2, 1, 4, rgba.data(), 8) != 0);
  const std::vector<double> from_rgba = data::decode_image(dir.file("rgba.png")).to_vector();
  REQUIRE(from_rgba.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CHECK(from_rgba[i] == Approx(expected[i]).epsilon(1e-7));
  }
  const std::vector<uint8_t> grey_alpha = {0, 0, 255, 17};
  REQUIRE(stbi_write_png(dir.file("ga.png").c_str(), 1, 2, 2, grey_alpha.data(), 2) != 0);
  CHECK(data::decode_image(dir.file("ga.png")).to_vector() ==
        std::vector<double>{0, 1, 0, 1, 0, 1});
}

TEST_CASE("decode image: a JPEG of one colour decodes to that colour", "[data]") {
  test::TempDir dir;
  // 16x16 (two 8x8 blocks per side) of RGB (200, 100, 50): a flat block has only a DC term, so
  // the JPEG round trip is exact up to rounding (we allow 2/255).
  std::vector<uint8_t> rgb;
  for (int i = 0; i < 16 * 16; ++i) rgb.insert(rgb.end(), {200, 100, 50});
  REQUIRE(stbi_write_jpg(dir.file("c.jpg").c_str(), 16, 16, 3, rgb.data(), 95) != 0);
  const Tensor x = data::decode_image(dir.file("c.jpg"));
  REQUIRE(x.shape() == engine::Shape{3, 16, 16});
  CHECK(at(x, 0, 5, 9) == Approx(200.0 / 255.0).margin(2.0 / 255.0));
  CHECK(at(x, 1, 15, 0) == Approx(100.0 / 255.0).margin(2.0 / 255.0));
  CHECK(at(x, 2, 0, 15) == Approx(50.0 / 255.0).margin(2.0 / 255.0));
}

TEST_CASE("decode image errors: empty, garbage, truncated and missing files are named", "[data]") {
  test::TempDir dir;
  test::write_bytes(dir.file("empty.jpg"), {});
  REQUIRE_THROWS_WITH(data::decode_image(dir.file("empty.jpg")), Contains(dir.file("empty.jpg")));
  test::write_bytes(dir.file("junk.jpg"), test::bytes_of("definitely not an image"));
  REQUIRE_THROWS_WITH(data::decode_image(dir.file("junk.jpg")),
                      Contains(dir.file("junk.jpg")) && Contains("cannot decode"));
  std::vector<uint8_t> rgb(64 * 64 * 3, 100);
  REQUIRE(stbi_write_png(dir.file("cut.png").c_str(), 64, 64, 3, rgb.data(), 64 * 3) != 0);
  std::vector<uint8_t> png = test::read_bytes(dir.file("cut.png"));
  png.resize(png.size() / 2);
  test::write_bytes(dir.file("cut.png"), png);
  REQUIRE_THROWS_WITH(data::decode_image(dir.file("cut.png")), Contains(dir.file("cut.png")));
  REQUIRE_THROWS_WITH(data::decode_image(dir.file("none.png")), Contains(dir.file("none.png")));
}

TEST_CASE("decode image errors: a header claiming a gigapixel image is refused before decoding",
          "[data]") {
  // A valid 2x2 PNG whose IHDR chunk is rewritten to say 10000x10000 (with a correct CRC, so
  // only the size is wrong): stb_image would ask for 300 MB before finding the data short. (It
  // refuses PNGs over 2^30 bytes itself; JPEG and other formats go up to 2^24 per side.)
  test::TempDir dir;
  std::vector<uint8_t> rgb(2 * 2 * 3, 7);
  REQUIRE(stbi_write_png(dir.file("big.png").c_str(), 2, 2, 3, rgb.data(), 2 * 3) != 0);
  std::vector<uint8_t> png = test::read_bytes(dir.file("big.png"));
  // Layout: 8-byte signature, IHDR length (4), "IHDR" at 12, width at 16, height at 20, then
  // depth/colour/compression/filter/interlace (5 bytes), CRC of bytes 12..28 at 29.
  REQUIRE(png.size() > 33);
  REQUIRE(std::string(png.begin() + 12, png.begin() + 16) == "IHDR");
  for (int field : {16, 20}) {
    const uint32_t side = 10000;
    for (int k = 0; k < 4; ++k) png[field + k] = uint8_t(side >> (24 - 8 * k));
  }
  const uint32_t crc = uint32_t(crc32(0L, png.data() + 12, 17));
  for (int k = 0; k < 4; ++k) png[29 + k] = uint8_t(crc >> (24 - 8 * k));
  test::write_bytes(dir.file("big.png"), png);
  REQUIRE_THROWS_WITH(data::decode_image(dir.file("big.png")),
                      Contains(dir.file("big.png")) && Contains("10000x10000"));
}

// Reference values from PyTorch 1.13's F.interpolate(mode="bilinear", antialias=True,
// align_corners=False) in float64, a port of PIL's resampling (precompute_coeffs), on the image
// v(c, y, x) = ((7c + 13y + 5x) mod 17) / 16: a non-integer shrink (13 x 11 -> 5 x 4, where the
// ends of each output's tap window are truncated) and a non-integer enlargement (5 x 3 -> 8 x 7).
TEST_CASE("resize: non-integer scales match PIL's filter (PyTorch antialias reference)", "[data]") {
  const auto image = [](int64_t channels, int64_t h, int64_t w) {
    std::vector<double> v;
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t y = 0; y < h; ++y) {
        for (int64_t x = 0; x < w; ++x) v.push_back(double((7 * c + 13 * y + 5 * x) % 17) / 16.0);
      }
    }
    return Tensor::from_vector(v, {channels, h, w});
  };
  const std::vector<double> shrunk = {
      0.439737654, 0.554027778, 0.486979167, 0.547685185, 0.504664703, 0.508996212, 0.477525253,
      0.531881313, 0.554861111, 0.477470238, 0.518779762, 0.479166667, 0.528619529, 0.458301768,
      0.542203283, 0.471766274, 0.507986111, 0.478576389, 0.540208333, 0.434259259, 0.472569444,
      0.475034722, 0.531944444, 0.488040123, 0.465172559, 0.529545455, 0.483049242, 0.485234287,
      0.434126984, 0.538541667, 0.461458333, 0.565873016, 0.514765713, 0.516950758, 0.470454545,
      0.534827441, 0.511959877, 0.468055556, 0.524965278, 0.527430556};
  const std::vector<double> enlarged = {
      0,          0.0446428571, 0.178571429, 0.3125,     0.446428571, 0.580357143, 0.625,
      0.35546875, 0.333705357,  0.268415179, 0.203125,   0.337053571, 0.470982143, 0.515625,
      0.796875,   0.69921875,   0.40625,     0.11328125, 0.21875,     0.32421875,  0.359375,
      0.640625,   0.637834821,  0.629464286, 0.62109375, 0.441964286, 0.262834821, 0.203125,
      0.484375,   0.529017857,  0.662946429, 0.796875,   0.617745536, 0.438616071, 0.37890625,
      0.328125,   0.372767857,  0.506696429, 0.640625,   0.74609375,  0.8515625,   0.88671875,
      0.171875,   0.216517857,  0.350446429, 0.484375,   0.618303571, 0.752232143, 0.796875,
      0.0625,     0.107142857,  0.241071429, 0.375,      0.508928571, 0.642857143, 0.6875};
  const std::vector<double> got_shrunk = data::resize_bilinear(image(2, 13, 11), 5, 4).to_vector();
  const std::vector<double> got_enlarged = data::resize_bilinear(image(1, 5, 3), 8, 7).to_vector();
  REQUIRE(got_shrunk.size() == shrunk.size());
  REQUIRE(got_enlarged.size() == enlarged.size());
  // f32 arithmetic against a float64 reference printed to 9 digits.
  for (std::size_t i = 0; i < shrunk.size(); ++i) {
    CHECK(got_shrunk[i] == Approx(shrunk[i]).margin(1e-6));
  }
  for (std::size_t i = 0; i < enlarged.size(); ++i) {
    CHECK(got_enlarged[i] == Approx(enlarged[i]).margin(1e-6));
  }
}

TEST_CASE("resize: same size is the identity", "[data]") {
  const Tensor x = coordinate_image(2, 5, 7);
  CHECK(data::resize_bilinear(x, 5, 7).to_vector() == x.to_vector());
}

TEST_CASE("resize: enlarging 2 -> 4 is bilinear with half-pixel centers", "[data]") {
  // Output centers (i + 0.5) / 2 - 0.5 in input pixels: -0.25, 0.25, 0.75, 1.25 -> clamped
  // [v0, 0.75 v0 + 0.25 v1, 0.25 v0 + 0.75 v1, v1]. Row (0.2, 0.6) -> (0.2, 0.3, 0.5, 0.6).
  const Tensor x = Tensor::from_vector({0.2, 0.6}, {1, 1, 2});
  const std::vector<double> y = data::resize_bilinear(x, 1, 4).to_vector();
  const std::vector<double> expected = {0.2, 0.3, 0.5, 0.6};
  for (int i = 0; i < 4; ++i) CHECK(y[i] == Approx(expected[i]).epsilon(1e-6));
}

TEST_CASE("resize: shrinking 4 -> 2 widens the triangle filter (antialiasing)", "[data]") {
  // scale 2: the filter's half-width is 2 input pixels. Output 0 has center 1.0; input pixels
  // 0, 1, 2 (centers 0.5, 1.5, 2.5) lie 0.25, 0.25, 0.75 filter units away: weights 0.75, 0.75,
  // 0.25, sum 1.75. Output 1 (center 3.0): pixels 1, 2, 3 with weights 0.25, 0.75, 0.75.
  // Row (0, 0.1, 0.2, 0.3): out0 = (0.075 + 0.05) / 1.75 = 0.0714286,
  //                         out1 = (0.025 + 0.15 + 0.225) / 1.75 = 0.2285714.
  const Tensor x = Tensor::from_vector({0.0, 0.1, 0.2, 0.3}, {1, 1, 4});
  const std::vector<double> y = data::resize_bilinear(x, 1, 2).to_vector();
  CHECK(y[0] == Approx(0.125 / 1.75).epsilon(1e-6));
  CHECK(y[1] == Approx(0.4 / 1.75).epsilon(1e-6));
  // The same filter applies along y: a 4x1 column gives the same two values.
  const std::vector<double> col = data::resize_bilinear(x.reshape({1, 4, 1}), 2, 1).to_vector();
  CHECK(col[0] == Approx(y[0]).epsilon(1e-6));
  CHECK(col[1] == Approx(y[1]).epsilon(1e-6));
}

TEST_CASE("center crop: 256 -> 224 takes rows and columns 16..239", "[data]") {
  const Tensor x = coordinate_image(3, 256, 256);
  const Tensor y = data::center_crop(x, 224);
  REQUIRE(y.shape() == engine::Shape{3, 224, 224});
  CHECK(at(y, 0, 0, 0) == coordinate(0, 16, 16));
  CHECK(at(y, 1, 10, 200) == coordinate(1, 26, 216));
  CHECK(at(y, 2, 223, 223) == coordinate(2, 239, 239));
  // Test transform of a 256x256 image: the resize is the identity, then the same crop.
  data::ImageTransform test_transform;
  engine::Generator gen(0);
  CHECK(test_transform.apply(x, gen).to_vector() == y.to_vector());
}

TEST_CASE("center crop: offsets round half to even, as Python's round()", "[data]") {
  // (8 - 3) / 2 = 2.5 -> 2; (6 - 3) / 2 = 1.5 -> 2; (7 - 3) / 2 = 2 -> 2.
  CHECK(at(data::center_crop(coordinate_image(1, 8, 8), 3), 0, 0, 0) == coordinate(0, 2, 2));
  CHECK(at(data::center_crop(coordinate_image(1, 6, 6), 3), 0, 0, 0) == coordinate(0, 2, 2));
  CHECK(at(data::center_crop(coordinate_image(1, 7, 9), 3), 0, 0, 0) == coordinate(0, 2, 3));
}

TEST_CASE("hflip and crop: hand-checked pixels, bad windows are errors", "[data]") {
  const Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {1, 2, 3});
  CHECK(data::hflip(x).to_vector() == std::vector<double>{3, 2, 1, 6, 5, 4});
  CHECK(data::crop(x, 1, 1, 1, 2).to_vector() == std::vector<double>{5, 6});
  REQUIRE_THROWS_WITH(data::crop(x, 1, 2, 1, 2), Contains("crop") && Contains("does not fit"));
  REQUIRE_THROWS_WITH(data::center_crop(x, 3), Contains("center_crop"));
}

TEST_CASE("random crop + flip: a crop of the input at the drawn offsets, flipped iff drawn",
          "[data]") {
  const Tensor x = coordinate_image(2, 9, 11);
  std::set<int64_t> tops, lefts;
  std::set<bool> flips;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    engine::Generator gen(seed), copy(seed);
    const Tensor y = data::random_crop_flip(x, 5, gen);
    CHECK(gen.offset == 1);  // one Philox block per image
    const data::CropFlip d = data::draw_crop_flip(9, 11, 5, copy);
    REQUIRE(d.top >= 0);
    REQUIRE(d.top <= 4);
    REQUIRE(d.left >= 0);
    REQUIRE(d.left <= 6);
    const Tensor expected = d.flip ? data::hflip(data::crop(x, d.top, d.left, 5, 5))
                                   : data::crop(x, d.top, d.left, 5, 5);
    REQUIRE(y.to_vector() == expected.to_vector());
    tops.insert(d.top);
    lefts.insert(d.left);
    flips.insert(d.flip);
  }
  CHECK(tops.size() == 5);   // every offset 0..4 occurs in 200 draws
  CHECK(lefts.size() == 7);  // 0..6
  CHECK(flips.size() == 2);
}

TEST_CASE("train transform: [3, 224, 224] from any size, same generator -> same pixels", "[data]") {
  const Tensor x = coordinate_image(3, 30, 40);
  data::ImageTransform train;
  train.train = true;
  engine::Generator a(7), b(7);
  const Tensor ya = train.apply(x, a), yb = train.apply(x, b);
  CHECK(ya.shape() == engine::Shape{3, 224, 224});
  CHECK(ya.to_vector() == yb.to_vector());
}

TEST_CASE("robrank transforms: resize both sides to 256, then crop (random + flip, or center)",
          "[data]") {
  // robrank's Resize((256, 256)) then RandomCrop(224) + RandomHorizontalFlip for training and
  // CenterCrop(224) for testing, on a non-square image so that a resize of one side only, no
  // resize, or a crop before the resize would all give other pixels.
  const Tensor x = coordinate_image(3, 300, 200);
  const Tensor resized = data::resize_bilinear(x, 256, 256);
  data::ImageTransform train;
  train.train = true;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    engine::Generator gen(seed), copy(seed);
    const Tensor y = train.apply(x, gen);
    CHECK(gen.offset == 1);  // one Philox block: the crop offsets and the flip
    CHECK(y.to_vector() == data::random_crop_flip(resized, 224, copy).to_vector());
  }
  data::ImageTransform test_transform;
  engine::Generator gen(0);
  CHECK(test_transform.apply(x, gen).to_vector() == data::center_crop(resized, 224).to_vector());
}

TEST_CASE("shorter-side resize: torchvision's Resize(256) sizes", "[data]") {
  // 300 x 200 (H x W): W is shorter -> W 256, H int(256 * 300 / 200) = 384.
  CHECK(data::resize_shorter_side(coordinate_image(3, 300, 200), 256).shape() ==
        engine::Shape{3, 384, 256});
  // 200 x 333: H shorter -> H 256, W int(256 * 333 / 200) = int(426.24) = 426.
  CHECK(data::resize_shorter_side(coordinate_image(1, 200, 333), 256).shape() ==
        engine::Shape{1, 256, 426});
  // Square stays square; the values are resize_bilinear's.
  const Tensor x = coordinate_image(1, 20, 20);
  CHECK(data::resize_shorter_side(x, 10).to_vector() ==
        data::resize_bilinear(x, 10, 10).to_vector());
  // Evaluation with the revisiting recipe: shorter side 256, then the center 224 crop.
  data::ImageTransform test;
  test.recipe = data::TransformRecipe::Revisiting;
  engine::Generator gen(3);
  const Tensor y = test.apply(coordinate_image(3, 300, 200), gen);
  CHECK(gen.offset == 0);  // no draws
  CHECK(y.to_vector() ==
        data::center_crop(data::resize_shorter_side(coordinate_image(3, 300, 200), 256), 224)
            .to_vector());
}

TEST_CASE("random resized crop: torchvision's window rules, 11 blocks per image", "[data]") {
  std::set<bool> flips;
  int64_t fallbacks = 0;
  double smallest = 1.0, largest = 0.0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    engine::Generator gen(seed);
    const data::ResizedCropFlip d = data::draw_resized_crop_flip(60, 80, gen);
    CHECK(gen.offset == 11);
    REQUIRE(d.height >= 1);
    REQUIRE(d.width >= 1);
    REQUIRE(d.top >= 0);
    REQUIRE(d.left >= 0);
    REQUIRE(d.top + d.height <= 60);
    REQUIRE(d.left + d.width <= 80);
    // Area 8-100 % and aspect 3/4-4/3, up to the rounding of w and h to integers.
    const double fraction = double(d.height * d.width) / (60.0 * 80.0);
    const double ratio = double(d.width) / double(d.height);
    CHECK(fraction >= 0.08 * 0.8);
    CHECK(fraction <= 1.0);
    CHECK(ratio >= 0.75 * 0.85);
    CHECK(ratio <= 4.0 / 3.0 / 0.85);
    smallest = std::min(smallest, fraction);
    largest = std::max(largest, fraction);
    fallbacks += d.height == 60 && d.width == 80;
    flips.insert(d.flip);
  }
  CHECK(smallest < 0.15);  // the whole range of areas is used
  CHECK(largest > 0.8);
  CHECK(flips.size() == 2);
  // A 4 x 1000 strip: no window of aspect <= 4/3 and area >= 8 % fits (h <= 4 means w <= 5), so
  // every try fails and the fallback is the centered crop of aspect 4/3: h 4, w round(5.33) = 5.
  engine::Generator gen(1);
  const data::ResizedCropFlip strip = data::draw_resized_crop_flip(4, 1000, gen);
  CHECK(strip.height == 4);
  CHECK(strip.width == 5);
  CHECK(strip.top == 0);
  CHECK(strip.left == (1000 - 5) / 2);
  // The image is that window, resized to size x size and flipped iff drawn.
  const Tensor x = coordinate_image(2, 60, 80);
  engine::Generator a(9), b(9);
  const data::ResizedCropFlip d = data::draw_resized_crop_flip(60, 80, b);
  const Tensor window =
      data::resize_bilinear(data::crop(x, d.top, d.left, d.height, d.width), 16, 16);
  CHECK(data::random_resized_crop_flip(x, 16, a).to_vector() ==
        (d.flip ? data::hflip(window) : window).to_vector());
  // The training transform of the recipe is exactly this.
  data::ImageTransform train;
  train.train = true;
  train.recipe = data::TransformRecipe::Revisiting;
  train.crop = 16;
  engine::Generator c(9);
  CHECK(train.apply(x, c).to_vector() == (d.flip ? data::hflip(window) : window).to_vector());
  CHECK(data::parse_transform_recipe("revisiting") == data::TransformRecipe::Revisiting);
  CHECK_THROWS_WITH(data::parse_transform_recipe("imagenet"), Contains("robrank or revisiting"));
}
