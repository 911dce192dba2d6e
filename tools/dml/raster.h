// The raster pictures of `dml report` (the retrieval grid, report_grid.cpp, and the attack
// picture, report_attack.cpp): an RGB canvas with framed image cells and text, written as PNG.
//
// Text is stb_easy_font's (Debian's libstb): a built-in font drawn as filled rectangles, so no font
// file is needed. At `size` s a character is at most 6 s wide and its capitals 7 s high; a line
// takes kLineHeight s pixels.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "metrics/distance.h"

namespace dml::raster {

struct Rgb {
  double r, g, b;  // 0..255
};
constexpr Rgb kWhite{255, 255, 255};
constexpr Rgb kBlack{0, 0, 0};
constexpr Rgb kQueryFrame{0, 90, 255};  // blue: unlike any grey image and the green/red frames
constexpr Rgb kMatchFrame{0, 170, 0};
constexpr Rgb kMismatchFrame{220, 0, 0};
constexpr int64_t kFrame = 3;       // pixels of a cell's frame
constexpr int64_t kLineHeight = 9;  // pixels per text line at size 1
// Under each cell of the grid and the attack picture: a band of two caption lines at size 1.
constexpr int64_t kCaption = 2 * kLineHeight + 4;

// An RGB canvas [3, H, W] of values in [0, 1], white at first.
struct Canvas {
  int64_t height, width;
  std::vector<double> values;

  Canvas(int64_t h, int64_t w);
  void set(int64_t y, int64_t x, const Rgb& c);
  void fill(int64_t y0, int64_t x0, int64_t h, int64_t w, const Rgb& c);
  // A framed cell at (y0, x0): the frame colour under the whole cell ((s H + 2 kFrame) x
  // (s W + 2 kFrame)), then the [1|3, H, W] image in [0, 1] inside, upscaled s times (nearest).
  void cell(int64_t y0, int64_t x0, const engine::Tensor& image, int64_t scale, const Rgb& frame);
  // One line of text whose top left is (y0, x0); pixels outside the canvas are dropped.
  void text(int64_t y0, int64_t x0, const std::string& text, int64_t size, const Rgb& color);
  // A cell's caption band at (top, left): two black lines from 3 and 3 + kLineHeight pixels down,
  // each cut to `band_width` (fit_text).
  void caption(int64_t top, int64_t left, int64_t band_width, const std::string& first,
               const std::string& second);
};

// The k indices j != self of the smallest keys[j], j < n, nearest first, ties to the smaller
// index (the order of metrics/knn.h).
std::vector<int64_t> nearest_by_key(const float* keys, int64_t n, int64_t self, int64_t k);

// The width in pixels of `text` at `size`.
int64_t text_width(const std::string& text, int64_t size);

// `text` cut to at most `width` pixels at `size` (the end replaced by ".." when cut).
std::string fit_text(const std::string& text, int64_t size, int64_t width);

// A distance or score in a caption: three significant digits ("%.3g": 0.123, 1.23, 12.3).
std::string short_number(double value);

// The distance a caption shows between row i of `a` and row j of `b` (prepared for one metric):
// Euclidean for N and E, 1 - cos for C, summed in double from the rows. (The ranking's f32 key,
// |a|^2 + |b|^2 - 2 a.b, loses the digits of a near-duplicate's distance to cancellation.)
double caption_distance(const metrics::Points& a, int64_t i, const metrics::Points& b, int64_t j);

// Writes the canvas as an RGB PNG: a temporary file renamed over `path`, as the other outputs.
void write_canvas_png(const std::string& path, const Canvas& canvas);

// The name of class `label` where the dataset has names (Fashion-MNIST's ten), else the number.
std::string class_name(const std::string& dataset, int64_t label);

// The cells of a picture of H x W images: each upscaled by `scale` (a scale_option of 0 means 2
// for images up to 64 pixels wide, else 1), framed, with a caption band under it.
struct CellLayout {
  int64_t scale = 1, cell_h = 0, cell_w = 0, row_h = 0;  // row_h = cell_h + kCaption
};
CellLayout cell_layout(int64_t h, int64_t w, int64_t scale_option);

// What a picture ranks against: the gallery's prepared points, labels and images, and the data
// set's name for class names.
struct PictureGallery {
  const metrics::Points& points;
  const std::vector<int64_t>& labels;
  std::function<engine::Tensor(int64_t)> image;
  std::string dataset;
};

// Draws the k nearest gallery images of one query to the right of its cell at (top, left), `gap`
// pixels apart, in rank order by `keys` (one per gallery image; the query's own index `self`
// excluded): framed green where the label is the query's `label`, red otherwise, captioned
// "#rank distance" (the distance from row `query_row` of `query_points`) and the class. Prints
// " j" for each (with "x" for another label) on stdout; returns how many share the label.
int64_t draw_neighbours(Canvas& canvas, const CellLayout& layout, int64_t top, int64_t left,
                        int64_t gap, const PictureGallery& gallery,
                        const metrics::Points& query_points, int64_t query_row, const float* keys,
                        int64_t self, int64_t k, int64_t label);

}  // namespace dml::raster
