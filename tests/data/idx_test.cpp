// IDX reader (plain and gzip, hand-built bytes, every validation error naming the file), the
// MNIST reader on generated roots, and the data set registry.
#include <zlib.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/idx.h"
#include "data/mnist.h"
#include "tests/io/io_test_util.h"

using Catch::Contains;

namespace {

void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  if (!bytes.empty()) REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) > 0);
  REQUIRE(gzclose(f) == Z_OK);
}

// 00 00 08 03 | 3 | 2 | 2 | bytes 0..11: three 2x2 u8 images.
std::vector<uint8_t> three_2x2_images() {
  return {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
}

// An MNIST-like split of n 28x28 images: image i is all bytes (i * 51) % 256, except pixel
// (0, 5) = 255; labels as given.
void write_mnist_split(const std::string& dir, const std::string& prefix,
                       const std::vector<uint8_t>& labels, bool gzip) {
  const int64_t n = static_cast<int64_t>(labels.size());
  std::vector<uint8_t> pixels;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<uint8_t> image(28 * 28, static_cast<uint8_t>((i * 51) % 256));
    image[5] = 255;
    pixels.insert(pixels.end(), image.begin(), image.end());
  }
  data::IdxHeader images{0x08, {n, 28, 28}};
  data::IdxHeader label_header{0x08, {n}};
  const std::string suffix = gzip ? ".gz" : "";
  const std::string images_path = dir + "/" + prefix + "-images-idx3-ubyte" + suffix;
  const std::string labels_path = dir + "/" + prefix + "-labels-idx1-ubyte" + suffix;
  if (gzip) {
    write_gzip(images_path, data::idx_bytes(images, pixels));
    write_gzip(labels_path, data::idx_bytes(label_header, labels));
  } else {
    test::write_bytes(images_path, data::idx_bytes(images, pixels));
    test::write_bytes(labels_path, data::idx_bytes(label_header, labels));
  }
}

}  // namespace

TEST_CASE("idx: plain u8 file with a hand-built header", "[data]") {
  test::TempDir dir;
  const std::string path = dir.file("images-idx3-ubyte");
  test::write_bytes(path, three_2x2_images());
  const data::IdxArray a = data::read_idx(path);
  CHECK(a.header.type_code == 0x08);
  CHECK(a.header.dims == std::vector<int64_t>{3, 2, 2});
  CHECK(a.data == std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(data::read_idx_header(path).dims == std::vector<int64_t>{3, 2, 2});
}

TEST_CASE("idx: gzip file (detected by magic 1f 8b, not by name) gives the same array", "[data]") {
  test::TempDir dir;
  const std::string path = dir.file("images-no-suffix");
  write_gzip(path, three_2x2_images());
  REQUIRE(test::read_bytes(path)[0] == 0x1f);
  const data::IdxArray a = data::read_idx(path);
  CHECK(a.header.dims == std::vector<int64_t>{3, 2, 2});
  CHECK(a.data == std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(data::read_idx_header(path).dims == std::vector<int64_t>{3, 2, 2});
}

TEST_CASE("idx: sizes are big-endian u32 and i16 elements are 2 bytes", "[data]") {
  // dims {258} of type 0x0B: header 00 00 0B 01 | 00 00 01 02, then 258 * 2 = 516 data bytes.
  std::vector<uint8_t> bytes = {0, 0, 0x0B, 1, 0, 0, 1, 2};
  bytes.resize(8 + 516, 7);
  test::TempDir dir;
  test::write_bytes(dir.file("a"), bytes);
  const data::IdxArray a = data::read_idx(dir.file("a"));
  CHECK(a.header.dims == std::vector<int64_t>{258});
  CHECK(a.header.element_size() == 2);
  CHECK(a.data.size() == 516);
}

TEST_CASE("idx errors: truncated, malformed or oversized files name the file", "[data]") {
  test::TempDir dir;
  const std::string path = dir.file("bad-idx3-ubyte");
  std::vector<uint8_t> good = three_2x2_images();

  SECTION("header shorter than 4 bytes") {
    test::write_bytes(path, {0, 0, 8});
    REQUIRE_THROWS_WITH(data::read_idx(path), Contains(path) && Contains("truncated IDX header"));
  }
  SECTION("dimension sizes cut off") {
    test::write_bytes(path, {0, 0, 8, 3, 0, 0, 0, 3, 0, 0});
    REQUIRE_THROWS_WITH(data::read_idx(path), Contains(path) && Contains("truncated IDX header"));
  }
  SECTION("bad magic") {
    good[0] = 0x50;
    test::write_bytes(path, good);
    REQUIRE_THROWS_WITH(data::read_idx(path), Contains(path) && Contains("magic"));
  }
  SECTION("unknown type code") {
    good[2] = 0x07;
    test::write_bytes(path, good);
    REQUIRE_THROWS_WITH(data::read_idx(path), Contains(path) && Contains("type code"));
  }
  SECTION("data shorter than the dims say") {
    good.resize(good.size() - 1);
    test::write_bytes(path, good);
    REQUIRE_THROWS_WITH(data::read_idx(path), Contains(path) && Contains("truncated IDX data"));
  }
  SECTION("data longer than the dims say") {
    good.push_back(0);
    test::write_bytes(path, good);
    REQUIRE_THROWS_WITH(data::read_idx(path),
                        Contains(path) && Contains("do not match the file size"));
  }
  SECTION("absurd dims are refused before allocating") {
    test::write_bytes(path,
                      {0, 0, 8, 3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 1, 0});
    REQUIRE_THROWS_WITH(data::read_idx(path), Contains(path) && Contains("2^40"));
  }
  SECTION("missing file") {
    REQUIRE_THROWS_WITH(data::read_idx(dir.file("nope")), Contains(dir.file("nope")));
  }
}

TEST_CASE("idx errors: truncated or corrupt gzip names the file", "[data]") {
  test::TempDir dir;
  const std::string path = dir.file("bad.gz");
  // 10,000 data bytes of a pattern, so the compressed stream is long enough to cut.
  std::vector<uint8_t> pixels(10000);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7 % 251);
  const std::vector<uint8_t> idx = data::idx_bytes({0x08, {100, 10, 10}}, pixels);

  SECTION("gzip stream cut in the middle") {
    write_gzip(path, idx);
    std::vector<uint8_t> gz = test::read_bytes(path);
    gz.resize(gz.size() / 2);
    test::write_bytes(path, gz);
    REQUIRE_THROWS_WITH(data::read_idx(path), Contains(path) && Contains("gzip"));
  }
  SECTION("gzip stream cut in its trailer, after all data") {
    write_gzip(path, idx);
    std::vector<uint8_t> gz = test::read_bytes(path);
    gz.resize(gz.size() - 4);  // the 8-byte trailer is CRC32 + ISIZE
    test::write_bytes(path, gz);
    REQUIRE_THROWS_WITH(data::read_idx(path), Contains(path) && Contains("gzip"));
  }
  SECTION("corrupt deflate data") {
    write_gzip(path, idx);
    std::vector<uint8_t> gz = test::read_bytes(path);
    for (std::size_t i = 20; i < 60; ++i) gz[i] ^= 0xA5;
    test::write_bytes(path, gz);
    REQUIRE_THROWS_WITH(data::read_idx(path), Contains(path));
  }
  SECTION("complete gzip of a truncated IDX file") {
    std::vector<uint8_t> cut = idx;
    cut.resize(cut.size() - 100);
    write_gzip(path, cut);
    REQUIRE_THROWS_WITH(data::read_idx(path), Contains(path) && Contains("truncated IDX data"));
  }
  SECTION("complete gzip with more data than the dims say") {
    std::vector<uint8_t> longer = idx;
    longer.push_back(1);
    write_gzip(path, longer);
    REQUIRE_THROWS_WITH(data::read_idx(path),
                        Contains(path) && Contains("do not match the file size"));
  }
}

TEST_CASE("mnist: generated gzip root, pixels are byte / 255 in [N, 1, 28, 28]", "[data]") {
  test::TempDir dir;
  const std::string root = dir.file("");
  write_mnist_split(root, "train", {9, 0, 3}, true);
  write_mnist_split(root, "t10k", {1, 2}, true);

  auto train = data::open_dataset("mnist", "train", root);
  CHECK(train->name() == "mnist");
  CHECK(train->split() == "train");
  CHECK(train->size() == 3);
  CHECK(train->num_classes() == 10);
  CHECK(train->labels() == std::vector<int64_t>{9, 0, 3});
  CHECK(train->image_shape() == engine::Shape{1, 28, 28});
  engine::Generator gen(0);
  // Image 1: all bytes 51 -> 51 / 255 = 0.2, pixel (0, 5) = 255 -> 1.0. Image 2: 102 -> 0.4.
  const std::vector<double> one = train->image(1, gen).to_vector();
  REQUIRE(one.size() == 784);
  CHECK(one[0] == Approx(0.2).epsilon(1e-7));
  CHECK(one[5] == 1.0);
  CHECK(one[783] == Approx(0.2).epsilon(1e-7));
  CHECK(train->image(2, gen).to_vector()[100] == Approx(0.4).epsilon(1e-7));
  CHECK(gen.offset == 0);  // no augmentation: the generator is not used

  auto test_split = data::open_dataset("mnist", "test", root);
  CHECK(test_split->size() == 2);
  CHECK(test_split->label(1) == 2);
}

TEST_CASE("mnist: un-gzipped names and torchvision's <root>/MNIST/raw layout", "[data]") {
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("MNIST/raw"));
  write_mnist_split(dir.file("MNIST/raw"), "train", {4, 5}, false);
  auto train = data::open_dataset("mnist", "train", dir.file(""));
  CHECK(train->labels() == std::vector<int64_t>{4, 5});
  REQUIRE_THROWS_WITH(data::open_dataset("mnist", "test", dir.file("")),
                      Contains("t10k-images-idx3-ubyte.gz"));
}

TEST_CASE("mnist errors: count mismatch, bad labels, missing root", "[data]") {
  test::TempDir dir;
  const std::string root = dir.file("");
  write_mnist_split(root, "train", {1, 2, 3}, true);
  SECTION("label count != image count names both files") {
    write_gzip(root + "/train-labels-idx1-ubyte.gz", data::idx_bytes({0x08, {2}}, {1, 2}));
    REQUIRE_THROWS_WITH(data::open_dataset("mnist", "train", root),
                        Contains("label count 2") && Contains("image count 3") &&
                            Contains("train-labels-idx1-ubyte.gz") &&
                            Contains("train-images-idx3-ubyte.gz"));
  }
  SECTION("label outside 0..9") {
    write_gzip(root + "/train-labels-idx1-ubyte.gz", data::idx_bytes({0x08, {3}}, {1, 12, 3}));
    REQUIRE_THROWS_WITH(data::open_dataset("mnist", "train", root),
                        Contains("train-labels-idx1-ubyte.gz") && Contains("label 12"));
  }
  SECTION("images with the wrong rank") {
    write_gzip(root + "/train-images-idx3-ubyte.gz",
               data::idx_bytes({0x08, {3, 4}}, std::vector<uint8_t>(12)));
    REQUIRE_THROWS_WITH(data::open_dataset("mnist", "train", root),
                        Contains("train-images-idx3-ubyte.gz") && Contains("3-dimensional"));
  }
  SECTION("mnist needs a root") {
    REQUIRE_THROWS_WITH(data::open_dataset("mnist", "train"), Contains("root"));
  }
}

TEST_CASE("dataset registry: names, aliases, describe, unknown names and splits", "[data]") {
  CHECK(data::dataset_names() == std::vector<std::string>{"fashion-mnist", "mnist", "cub200",
                                                          "cars196", "sop", "synthetic"});
  REQUIRE_THROWS_WITH(data::open_dataset("imagenet", "train", "/tmp"),
                      Contains("imagenet") && Contains("fashion-mnist") && Contains("sop"));
  REQUIRE_THROWS_WITH(data::open_dataset("mnist", "val", "/tmp"), Contains("split 'val'"));

  test::TempDir dir;
  const std::string root = dir.file("");
  write_mnist_split(root, "train", {9, 0, 3}, true);
  write_mnist_split(root, "t10k", {1, 2}, false);
  const std::vector<data::SplitSummary> s = data::describe_dataset("mnist", root);
  REQUIRE(s.size() == 2);
  CHECK(s[0].split == "train");
  CHECK(s[0].size == 3);
  CHECK(s[0].num_classes == 10);
  CHECK(s[1].split == "test");
  CHECK(s[1].size == 2);
  // robrank's short name for Fashion-MNIST, read from an explicit root.
  CHECK(data::open_dataset("fashion", "train", root)->name() == "fashion-mnist");
}

TEST_CASE("idx: a zero dimension beside huge ones is an empty array, without overflow", "[data]") {
  // Found by tests/fuzz/fuzz_idx: dims 0xFFFFFFFF x 0xFFFFFFFD x 0 describe zero bytes, but the
  // product of the first two overflows int64 if computed before seeing the zero.
  test::TempDir dir;
  const std::string path = dir.file("empty-idx3-ubyte");
  test::write_bytes(path, {0, 0, 8, 3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFD, 0, 0, 0, 0});
  data::IdxArray array = data::read_idx(path);
  REQUIRE(array.header.numel() == 0);
  REQUIRE(array.header.dims == std::vector<int64_t>{0xFFFFFFFFll, 0xFFFFFFFDll, 0});
}
