// The raster pictures of `dml report` (header: tools/dml/raster.h).
#include "tools/dml/raster.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"
#include <stb/stb_easy_font.h>
#pragma GCC diagnostic pop

#include "data/png_writer.h"
#include "engine/io/file_io.h"
#include "kernels/common/check.h"

namespace dml::raster {

namespace {

// stb_easy_font's quads of one line at size 1, as (x0, y0, x1, y1) rectangles.
struct Box {
  float x0, y0, x1, y1;
};
std::vector<Box> glyph_boxes(const std::string& text) {
  // 270 bytes of vertices per character is stb_easy_font's own worst-case estimate.
  std::vector<char> buffer(270 * (text.size() + 1));
  std::string copy = text;
  const int quads = stb_easy_font_print(0.0f, 0.0f, copy.data(), nullptr, buffer.data(),
                                        static_cast<int>(buffer.size()));
  std::vector<Box> boxes;
  for (int q = 0; q < quads; ++q) {
    // 4 vertices of 16 bytes (x, y, z floats and 4 colour bytes); vertex 0 and 2 are corners.
    const float* v0 = reinterpret_cast<const float*>(buffer.data() + 64 * q);
    const float* v2 = reinterpret_cast<const float*>(buffer.data() + 64 * q + 32);
    boxes.push_back({v0[0], v0[1], v2[0], v2[1]});
  }
  return boxes;
}

}  // namespace

Canvas::Canvas(int64_t h, int64_t w)
    : height(h), width(w), values(static_cast<size_t>(3 * h * w), 1.0) {}

void Canvas::set(int64_t y, int64_t x, const Rgb& c) {
  if (y < 0 || x < 0 || y >= height || x >= width) return;
  const size_t plane = static_cast<size_t>(height * width);
  const size_t at = static_cast<size_t>(y * width + x);
  values[at] = c.r / 255.0;
  values[plane + at] = c.g / 255.0;
  values[2 * plane + at] = c.b / 255.0;
}

void Canvas::fill(int64_t y0, int64_t x0, int64_t h, int64_t w, const Rgb& c) {
  for (int64_t y = y0; y < y0 + h; ++y) {
    for (int64_t x = x0; x < x0 + w; ++x) set(y, x, c);
  }
}

void Canvas::cell(int64_t y0, int64_t x0, const engine::Tensor& image, int64_t scale,
                  const Rgb& frame) {
  const int64_t channels = image.size(0), h = image.size(1), w = image.size(2);
  fill(y0, x0, scale * h + 2 * kFrame, scale * w + 2 * kFrame, frame);
  const std::vector<double> pixels = image.contiguous().to_vector();
  const size_t plane = static_cast<size_t>(h * w);
  for (int64_t y = 0; y < scale * h; ++y) {
    for (int64_t x = 0; x < scale * w; ++x) {
      const size_t at = static_cast<size_t>((y / scale) * w + x / scale);
      const double r = pixels[at];
      const double g = channels == 3 ? pixels[plane + at] : r;
      const double b = channels == 3 ? pixels[2 * plane + at] : r;
      set(y0 + kFrame + y, x0 + kFrame + x, Rgb{255 * r, 255 * g, 255 * b});
    }
  }
}

void Canvas::text(int64_t y0, int64_t x0, const std::string& line, int64_t size, const Rgb& color) {
  for (const Box& b : glyph_boxes(line)) {
    const int64_t top = y0 + std::lround(b.y0 * static_cast<float>(size));
    const int64_t left = x0 + std::lround(b.x0 * static_cast<float>(size));
    const int64_t bottom = y0 + std::lround(b.y1 * static_cast<float>(size));
    const int64_t right = x0 + std::lround(b.x1 * static_cast<float>(size));
    fill(top, left, bottom - top, right - left, color);
  }
}

void Canvas::caption(int64_t top, int64_t left, int64_t band_width, const std::string& first,
                     const std::string& second) {
  text(top + 3, left, fit_text(first, 1, band_width), 1, kBlack);
  text(top + 3 + kLineHeight, left, fit_text(second, 1, band_width), 1, kBlack);
}

std::vector<int64_t> nearest_by_key(const float* keys, int64_t n, int64_t self, int64_t k) {
  std::vector<int64_t> order;
  for (int64_t j = 0; j < n; ++j) {
    if (j != self) order.push_back(j);
  }
  k = std::min<int64_t>(k, static_cast<int64_t>(order.size()));
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
    return keys[a] < keys[b] || (keys[a] == keys[b] && a < b);
  });
  order.resize(static_cast<size_t>(k));
  return order;
}

int64_t text_width(const std::string& text, int64_t size) {
  std::string copy = text;
  return size * stb_easy_font_width(copy.data());
}

std::string fit_text(const std::string& text, int64_t size, int64_t width) {
  if (text_width(text, size) <= width) return text;
  std::string cut = text;
  while (!cut.empty() && text_width(cut + "..", size) > width) cut.pop_back();
  return cut + "..";
}

std::string short_number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", value);
  return buffer;
}

double caption_distance(const metrics::Points& a, int64_t i, const metrics::Points& b, int64_t j) {
  const float* x = a.row(i);
  const float* y = b.row(j);
  double sum = 0.0;
  for (int64_t t = 0; t < a.d; ++t) {
    const double term = a.metric == metrics::Metric::C ? static_cast<double>(x[t]) * y[t]
                                                       : static_cast<double>(x[t]) - y[t];
    sum += a.metric == metrics::Metric::C ? term : term * term;
  }
  return a.metric == metrics::Metric::C ? 1.0 - sum : std::sqrt(sum);
}

void write_canvas_png(const std::string& path, const Canvas& canvas) {
  const std::string temp = engine::detail::atomic_temp_path(path);
  try {
    data::write_png(temp,
                    engine::Tensor::from_vector(canvas.values, {3, canvas.height, canvas.width}));
    std::filesystem::rename(temp, path);
  } catch (const std::exception& e) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    engine::fail(path, ": cannot write the PNG: ", e.what());
  }
}

std::string class_name(const std::string& dataset, int64_t label) {
  // Fashion-MNIST's classes in label order (Xiao et al. 2017, the data set's README).
  static const char* const kFashion[] = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                         "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                         "Bag",         "Ankle boot"};
  if (dataset == "fashion-mnist" && label >= 0 && label < 10) return kFashion[label];
  return std::to_string(label);
}

CellLayout cell_layout(int64_t h, int64_t w, int64_t scale_option) {
  CellLayout layout;
  layout.scale = scale_option > 0 ? scale_option : (w <= 64 ? 2 : 1);
  layout.cell_h = layout.scale * h + 2 * kFrame;
  layout.cell_w = layout.scale * w + 2 * kFrame;
  layout.row_h = layout.cell_h + kCaption;
  return layout;
}

int64_t draw_neighbours(Canvas& canvas, const CellLayout& layout, int64_t top, int64_t left,
                        int64_t gap, const PictureGallery& gallery,
                        const metrics::Points& query_points, int64_t query_row, const float* keys,
                        int64_t self, int64_t k, int64_t label) {
  const int64_t n = static_cast<int64_t>(gallery.labels.size());
  const std::vector<int64_t> nearest = nearest_by_key(keys, n, self, k);
  int64_t matches = 0;
  for (int64_t c = 0; c < k; ++c) {
    const int64_t j = nearest[static_cast<size_t>(c)];
    const int64_t other = gallery.labels[static_cast<size_t>(j)];
    const bool match = other == label;
    const int64_t x = left + (c + 1) * (layout.cell_w + gap);
    canvas.cell(top, x, gallery.image(j), layout.scale, match ? kMatchFrame : kMismatchFrame);
    canvas.caption(top + layout.cell_h, x, layout.cell_w,
                   "#" + std::to_string(c + 1) + " " +
                       short_number(caption_distance(query_points, query_row, gallery.points, j)),
                   class_name(gallery.dataset, other));
    matches += match;
    std::printf(" %lld%s", static_cast<long long>(j), match ? "" : "x");
  }
  return matches;
}

}  // namespace dml::raster
