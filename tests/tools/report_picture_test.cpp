// `dml report`'s pictures (tools/dml/report_grid.cpp, report_attack.cpp, raster.h): the retrieval
// grid and the attack picture of a tiny trained model, checked cell by cell against what is worked
// out independently (the neighbours by a brute-force distance loop over the model's embeddings,
// the layout from docs/report.md, each image found by its pixels); captions against the same text
// drawn on a blank band. The charts: report_test.cpp.
#include <stb/stb_image.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "engine/random.h"
#include "kernels/common/check.h"
#include "models/embed.h"
#include "tests/io/io_test_util.h"
#include "tests/tools/tiny_training.h"
#include "tools/dml/args.h"
#include "tools/dml/commands.h"
#include "tools/dml/load_model.h"
#include "tools/dml/raster.h"
#include "tools/dml/trainer.h"

namespace {

int report(std::vector<std::string> tokens) {
  dml::Args args(std::move(tokens));
  return dml::run_report(args);
}

}  // namespace

namespace {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  const uint8_t* at(int y, int x) const { return rgb.data() + 3 * (y * width + x); }
};

Image read_png(const std::string& path) {
  Image image;
  int channels = 0;
  unsigned char* pixels = stbi_load(path.c_str(), &image.width, &image.height, &channels, 3);
  REQUIRE(pixels != nullptr);
  image.rgb.assign(pixels, pixels + 3 * image.width * image.height);
  stbi_image_free(pixels);
  return image;
}

struct Split {
  std::vector<std::vector<uint8_t>> pixels;  // 28 x 28 bytes per image
  std::vector<int64_t> labels;
  std::vector<std::vector<double>> embeddings;  // L2-normalized (metric N)
};

// The generated test split and the trained model's embeddings of it, computed without `dml report`.
Split load_split(const std::string& model_path) {
  const auto dataset = data::open_dataset("mnist", "test", tiny_training::data_root());
  const int64_t n = dataset->size();
  const dml::TrainedModel trained = dml::load_trained_model(model_path, engine::Device::cpu());
  REQUIRE(trained.metric == metrics::Metric::N);
  engine::Tensor images = engine::Tensor::empty({n, 1, 28, 28});
  Split split;
  engine::Generator gen(0);
  for (int64_t i = 0; i < n; ++i) {
    const engine::Tensor image = dataset->image(i, gen);
    images.select(0, i).copy_(image);
    std::vector<uint8_t> bytes;
    for (double v : image.to_vector()) bytes.push_back(static_cast<uint8_t>(std::lround(255 * v)));
    split.pixels.push_back(bytes);
    split.labels.push_back(dataset->label(i));
  }
  const std::vector<double> e = models::embed(*trained.model, images).to_vector();
  const size_t d = e.size() / static_cast<size_t>(n);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> row(e.begin() + static_cast<std::ptrdiff_t>(i * d),
                            e.begin() + static_cast<std::ptrdiff_t>((i + 1) * d));
    double norm = 0.0;
    for (double v : row) norm += v * v;
    for (double& v : row) v /= std::sqrt(norm);
    split.embeddings.push_back(row);
  }
  return split;
}

// The Euclidean distance of images a and b's normalized embeddings.
double distance(const Split& split, int64_t a, int64_t b) {
  double d2 = 0.0;
  for (size_t t = 0; t < split.embeddings[0].size(); ++t) {
    const double diff = split.embeddings[a][t] - split.embeddings[b][t];
    d2 += diff * diff;
  }
  return std::sqrt(d2);
}

// The k nearest of images 0..m-1 to image q (q itself left out), by brute force.
std::vector<int64_t> brute_force_neighbours(const Split& split, int64_t q, int64_t m, int64_t k) {
  std::vector<std::pair<double, int64_t>> ranked;
  for (int64_t j = 0; j < m; ++j) {
    if (j == q) continue;
    double d2 = 0.0;
    for (size_t t = 0; t < split.embeddings[0].size(); ++t) {
      const double diff = split.embeddings[q][t] - split.embeddings[j][t];
      d2 += diff * diff;
    }
    ranked.emplace_back(d2, j);
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<int64_t> top;
  for (int64_t i = 0; i < k; ++i) top.push_back(ranked[i].second);
  return top;
}

// A canvas's RGB bytes row by row, as the PNG stores them.
std::vector<uint8_t> canvas_bytes(const dml::raster::Canvas& canvas) {
  std::vector<uint8_t> bytes;
  const size_t plane = static_cast<size_t>(canvas.height * canvas.width);
  for (size_t i = 0; i < plane; ++i) {
    for (size_t c = 0; c < 3; ++c) {
      bytes.push_back(static_cast<uint8_t>(std::lround(255 * canvas.values[c * plane + i])));
    }
  }
  return bytes;
}

// The pixels of a `width` x 22 caption band with two lines of text as docs/report.md draws them
// (from 3 and 12 pixels down, cut to the width).
std::vector<uint8_t> caption_pixels(int64_t width, const std::string& first,
                                    const std::string& second) {
  dml::raster::Canvas band(22, width);
  band.text(3, 0, dml::raster::fit_text(first, 1, width), 1, dml::raster::kBlack);
  band.text(12, 0, dml::raster::fit_text(second, 1, width), 1, dml::raster::kBlack);
  return canvas_bytes(band);
}

// One line of text drawn from the top left of a `width` x 9 white band.
std::vector<uint8_t> line_pixels(int64_t width, const std::string& text) {
  dml::raster::Canvas band(9, width);
  band.text(0, 0, dml::raster::fit_text(text, 1, width), 1, dml::raster::kBlack);
  return canvas_bytes(band);
}

std::vector<uint8_t> region(const Image& image, int y0, int x0, int h, int w) {
  std::vector<uint8_t> bytes;
  for (int y = y0; y < y0 + h; ++y) {
    for (int x = x0; x < x0 + w; ++x) bytes.insert(bytes.end(), image.at(y, x), image.at(y, x) + 3);
  }
  return bytes;
}

std::string three_digits(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", value);
  return buffer;
}

// Checks a grid of `rows` x (1 + k) cells of 28 x 28 images upscaled by `scale` (frames of 3
// pixels, gaps of 6, a 22-pixel caption band under each cell): size, white gaps, frame colours,
// captions, and which image each cell shows (found by its pixels). Returns the query index of
// every row and the number of green frames.
struct Grid {
  std::vector<int64_t> queries;
  int64_t greens = 0;
};
Grid check_grid(const std::string& png, const Split& split, int64_t rows, int64_t k, int64_t scale,
                int64_t m) {
  const Image image = read_png(png);
  const int cell = static_cast<int>(28 * scale + 6);
  const int row = cell + 22;  // a cell and its caption band
  REQUIRE(image.width == (k + 1) * cell + (k + 2) * 6);
  REQUIRE(image.height == rows * row + (rows + 1) * 6);
  const uint8_t white[3] = {255, 255, 255}, blue[3] = {0, 90, 255}, green[3] = {0, 170, 0},
                red[3] = {220, 0, 0};
  auto is = [](const uint8_t* p, const uint8_t* c) {
    return p[0] == c[0] && p[1] == c[1] && p[2] == c[2];
  };
  // Outside every cell and caption band: white.
  int64_t non_white_gap = 0;
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) {
      const bool in_cell = (y % (row + 6)) >= 6 && (x % (cell + 6)) >= 6 && y < image.height - 6 &&
                           x < image.width - 6;
      if (!in_cell && !is(image.at(y, x), white)) ++non_white_gap;
    }
  }
  CHECK(non_white_gap == 0);

  std::vector<int64_t> queries;
  int64_t greens = 0, reds = 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> shown;
    for (int64_t c = 0; c <= k; ++c) {
      const int y0 = static_cast<int>(6 + r * (row + 6)), x0 = static_cast<int>(6 + c * (cell + 6));
      // The image inside the frame: grey RGB, each pixel a scale x scale block.
      std::vector<uint8_t> bytes(28 * 28);
      bool grey_blocks = true;
      for (int y = 0; y < 28 * scale; ++y) {
        for (int x = 0; x < 28 * scale; ++x) {
          const uint8_t* p = image.at(y0 + 3 + y, x0 + 3 + x);
          const uint8_t want = bytes[static_cast<size_t>((y / scale) * 28 + x / scale)];
          if (y % scale == 0 && x % scale == 0) {
            bytes[static_cast<size_t>((y / scale) * 28 + x / scale)] = p[0];
          } else if (p[0] != want) {
            grey_blocks = false;
          }
          if (p[1] != p[0] || p[2] != p[0]) grey_blocks = false;
        }
      }
      CHECK(grey_blocks);
      int64_t found = -1, matches = 0;
      for (size_t i = 0; i < split.pixels.size(); ++i) {
        if (split.pixels[i] == bytes) {
          found = static_cast<int64_t>(i);
          ++matches;
        }
      }
      INFO("row " << r << " cell " << c);
      REQUIRE(matches == 1);
      REQUIRE(found < m);
      shown.push_back(found);
      // The frame: 3 pixels on every side, one colour.
      const int64_t q = shown[0];
      const uint8_t* want = c == 0 ? blue : (split.labels[found] == split.labels[q] ? green : red);
      if (c > 0) ++(want == green ? greens : reds);
      int64_t wrong = 0;
      for (int y = 0; y < cell; ++y) {
        for (int x = 0; x < cell; ++x) {
          const bool frame = y < 3 || x < 3 || y >= cell - 3 || x >= cell - 3;
          if (frame && !is(image.at(y0 + y, x0 + x), want)) ++wrong;
        }
      }
      CHECK(wrong == 0);
      // The caption: "query Q" or "#RANK DISTANCE", then the class (MNIST has no names: the
      // label).
      const std::string first =
          c == 0 ? "query " + std::to_string(q)
                 : "#" + std::to_string(c) + " " + three_digits(distance(split, q, found));
      INFO("caption " << first);
      CHECK(region(image, y0 + cell, x0, 22, cell) ==
            caption_pixels(cell, first, std::to_string(split.labels[found])));
    }
    const std::vector<int64_t> expected = brute_force_neighbours(split, shown[0], m, k);
    CHECK(std::vector<int64_t>(shown.begin() + 1, shown.end()) == expected);
    queries.push_back(shown[0]);
  }
  // Three test images per class and k >= 3: every row has a red neighbour.
  INFO(greens << " green and " << reds << " red frames");
  if (k >= 3) CHECK(reds >= rows);
  CHECK(std::set<int64_t>(queries.begin(), queries.end()).size() == queries.size());
  CHECK(std::is_sorted(queries.begin(), queries.end()));
  return {queries, greens};
}

}  // namespace

TEST_CASE("report --grid: queries, neighbours and frames of a tiny trained model", "[report]") {
  test::TempDir dir;
  const dml::TrainConfig config = tiny_training::tiny_config("triplet", dir.file("run"), 10);
  REQUIRE(dml::train(config, dml::TrainOptions()) == 0);
  const std::string model = dir.file("run/model.safetensors");
  const Split split = load_split(model);
  REQUIRE(split.labels.size() == 30);
  const std::vector<std::string> common = {
      "--grid",   "--checkpoint", model, "--data", "mnist", "--root", tiny_training::data_root(),
      "--device", "cpu"};
  auto grid = [&](std::vector<std::string> more) {
    std::vector<std::string> tokens = common;
    tokens.insert(tokens.end(), more.begin(), more.end());
    return report(tokens);
  };

  // Defaults: 8 queries, top 5, scale 2 for 28 x 28, all 30 images.
  REQUIRE(grid({"--seed", "3", "--out", dir.file("a.png")}) == 0);
  const Grid a = check_grid(dir.file("a.png"), split, 8, 5, 2, 30);
  CHECK(a.greens > 0);  // both frame colours are exercised (the model ranks some classes well)
  // Same seed, same file; another seed, other queries.
  REQUIRE(grid({"--seed", "3", "--out", dir.file("b.png")}) == 0);
  CHECK(test::read_bytes(dir.file("a.png")) == test::read_bytes(dir.file("b.png")));
  REQUIRE(grid({"--seed", "4", "--out", dir.file("c.png")}) == 0);
  CHECK(check_grid(dir.file("c.png"), split, 8, 5, 2, 30).queries != a.queries);

  // The first 12 images only, 4 rows of 3 neighbours at scale 1: 166 wide, 4 * 56 + 5 * 6 = 254
  // high.
  REQUIRE(grid({"--max-images", "12", "--queries", "4", "--k", "3", "--scale", "1", "--out",
                dir.file("d.png")}) == 0);
  check_grid(dir.file("d.png"), split, 4, 3, 1, 12);

  // More neighbours or queries than the images allow: usage errors.
  CHECK_THROWS_AS(grid({"--max-images", "4", "--k", "4", "--out", dir.file("e.png")}),
                  dml::UsageError);
  CHECK_THROWS_AS(
      grid({"--max-images", "4", "--queries", "5", "--k", "2", "--out", dir.file("e.png")}),
      dml::UsageError);
  CHECK_FALSE(std::filesystem::exists(dir.file("e.png")));
}

TEST_CASE("report: class names of Fashion-MNIST, label numbers elsewhere", "[report]") {
  CHECK(dml::raster::class_name("fashion-mnist", 0) == "T-shirt/top");
  CHECK(dml::raster::class_name("fashion-mnist", 9) == "Ankle boot");
  CHECK(dml::raster::class_name("mnist", 3) == "3");
  CHECK(dml::raster::class_name("cub200", 150) == "150");
}

namespace {

// What one cell of an attack picture shows: its image (28 x 28 grey bytes at scale 2) and the
// colour of its frame (its top left pixel).
struct Tile {
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> frame;
};
Tile tile_at(const Image& image, int y0, int x0) {
  Tile tile;
  tile.frame.assign(image.at(y0, x0), image.at(y0, x0) + 3);
  for (int y = 0; y < 28; ++y) {
    for (int x = 0; x < 28; ++x) tile.bytes.push_back(image.at(y0 + 3 + 2 * y, x0 + 3 + 2 * x)[0]);
  }
  return tile;
}

}  // namespace

TEST_CASE("report --attack: clean and adversarial top-k, the perturbation, the caption",
          "[report]") {
  test::TempDir dir;
  const dml::TrainConfig config = tiny_training::tiny_config("triplet", dir.file("run"), 10);
  REQUIRE(dml::train(config, dml::TrainOptions()) == 0);
  const std::string model = dir.file("run/model.safetensors");
  const Split split = load_split(model);
  const std::string spec = "QA:pm=+:M=1:eps=0.0627:alpha=0.0157:pgditer=4";
  auto attack = [&](std::vector<std::string> more) {
    std::vector<std::string> tokens = {
        "--attack", spec,    "--checkpoint", model,
        "--data",   "mnist", "--root",       tiny_training::data_root(),
        "--device", "cpu"};
    tokens.insert(tokens.end(), more.begin(), more.end());
    return report(tokens);
  };
  const std::string out = dir.file("attack.png");
  REQUIRE(attack({"--queries", "3", "--k", "4", "--out", out}) == 0);
  const Image image = read_png(out);
  // Cells of 2 * 28 + 6 = 62 pixels; a group of 5 cells is 5 * 62 + 4 * 6 = 334 wide; the width
  // 6 + 334 + 18 + 334 + 18 + 62 + 6 = 778. Header 6 + 4 * 9 + 6 = 48, column titles 13, then
  // 3 rows of 62 + 22 + 6 = 90: 48 + 13 + 270 = 331 high.
  REQUIRE(image.width == 778);
  REQUIRE(image.height == 331);
  const std::vector<uint8_t> blue = {0, 90, 255}, green = {0, 170, 0}, red = {220, 0, 0},
                             grey = {128, 128, 128};
  int64_t tiles = 0;
  for (int r = 0; r < 3; ++r) {
    INFO("row " << r);
    const int top = 61 + 90 * r;
    // Clean group: image r itself, then its brute-force top-4 among all 30 images.
    const Tile query = tile_at(image, top, 6);
    CHECK(query.frame == blue);
    CHECK(query.bytes == split.pixels[static_cast<size_t>(r)]);
    const std::vector<int64_t> nearest = brute_force_neighbours(split, r, 30, 4);
    for (int c = 0; c < 4; ++c) {
      const int64_t j = nearest[static_cast<size_t>(c)];
      const Tile t = tile_at(image, top, 6 + 68 * (c + 1));
      CHECK(t.bytes == split.pixels[static_cast<size_t>(j)]);
      CHECK(t.frame == (split.labels[static_cast<size_t>(j)] == split.labels[r] ? green : red));
      CHECK(region(image, top + 62, 6 + 68 * (c + 1), 22, 62) ==
            caption_pixels(62,
                           "#" + std::to_string(c + 1) + " " + three_digits(distance(split, r, j)),
                           std::to_string(split.labels[static_cast<size_t>(j)])));
      ++tiles;
    }
    // Adversarial group from x = 6 + 334 + 18 = 358: the attacked image, within eps of the clean
    // one (16 of 255 levels, +1 for rounding), and 4 gallery images of the split.
    const Tile adversarial = tile_at(image, top, 358);
    CHECK(adversarial.frame == blue);
    int max_change = 0;
    for (size_t i = 0; i < adversarial.bytes.size(); ++i) {
      max_change = std::max(max_change, std::abs(adversarial.bytes[i] - query.bytes[i]));
    }
    CHECK(max_change <= 17);
    CHECK(max_change > 0);
    for (int c = 0; c < 4; ++c) {
      const Tile t = tile_at(image, top, 358 + 68 * (c + 1));
      CHECK(std::count(split.pixels.begin(), split.pixels.end(), t.bytes) == 1);
      CHECK((t.frame == green || t.frame == red));
      ++tiles;
    }
    // The perturbation from x = 358 + 334 + 18 = 710: grey where nothing changed.
    const Tile delta = tile_at(image, top, 710);
    CHECK(delta.frame == grey);
    for (size_t i = 0; i < delta.bytes.size(); ++i) {
      if (adversarial.bytes[i] == query.bytes[i]) CHECK(std::abs(delta.bytes[i] - 128) <= 1);
    }
    tiles += 3;
  }
  CHECK(tiles == 3 * (2 * 4 + 3));
  // Header line 3 (from y = 6 + 2 * 9): the image count, the gallery and the mode, in the
  // words of `dml attack` ("3 attacked of mnist test (gallery 30)") and `dml ers` files.
  CHECK(region(image, 24, 6, 9, 766) ==
        line_pixels(766,
                    "3 images attacked of mnist test (gallery 30), robrank_compat false, "
                    "seed 0"));

  // --robrank-compat: the header says so.
  REQUIRE(attack({"--queries", "1", "--k", "2", "--robrank-compat", "--out", out}) == 0);
  const Image compat = read_png(out);
  CHECK(compat.height == 48 + 13 + 90);
  CHECK(region(compat, 24, 6, 9, compat.width - 12) ==
        line_pixels(compat.width - 12,
                    "1 images attacked of mnist test (gallery 30), robrank_compat true, seed 0"));

  // Bad inputs: usage errors before any work, naming the option.
  CHECK_THROWS_WITH(attack({"--queries", "0", "--out", out}), Catch::Contains("--queries"));
  CHECK_THROWS_WITH(attack({"--queries", "31", "--out", out}),
                    Catch::Contains("--queries 31") && Catch::Contains("30 images"));
  CHECK_THROWS_WITH(attack({"--k", "0", "--out", out}), Catch::Contains("--k"));
  CHECK_THROWS_WITH(attack({"--max-images", "5", "--out", out}), Catch::Contains("--max-images"));
  CHECK_THROWS_WITH(attack({"--json", "--out", out}), Catch::Contains("--json"));
  CHECK_THROWS_WITH(attack({"--batch-size", "2", "--out", out}), Catch::Contains("--batch-size"));
  CHECK_THROWS_AS(
      report({"--attack", "QA:pm=+:bogus=1", "--checkpoint", model, "--out", dir.file("x.png")}),
      dml::UsageError);
  CHECK_THROWS_WITH(report({"--attack", "QA:pm=+:M=1", "--out", dir.file("x.png")}),
                    Catch::Contains("--checkpoint"));
  CHECK_THROWS_AS(report({"--attack", "QA:pm=+:M=1", "--grid", "--checkpoint", model, "--out",
                          dir.file("x.png")}),
                  dml::UsageError);
  CHECK_FALSE(std::filesystem::exists(dir.file("x.png")));
}
