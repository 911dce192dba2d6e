// dml report --grid: a retrieval grid of a trained model as a PNG (docs/report.md).
//
// The first M images of the split are both the queries' pool and the gallery. N queries are the
// first N entries of engine::permutation_vector(M, Generator(seed)), sorted by index (one row
// each, top to bottom). Each row is the query and its K nearest gallery images in rank order,
// ranked by (key, index) as metrics/knn.h does (metrics/distance.h keys; the query's own copy
// excluded by index, never by distance).
//
// Layout (pixels): every image is upscaled by the integer factor s (nearest neighbour) and framed
// by a 3-pixel border; cells are separated, and surrounded, by 6 white pixels. With images of
// H x W, a cell is (s H + 6) x (s W + 6) and the PNG (RGB) is
//   width  = (K + 1) (s W + 6) + (K + 2) 6,   height = N (s H + 6) + (N + 1) 6.
// Frames: query grey (128, 128, 128); a neighbour with the query's label green (0, 170, 0),
// otherwise red (220, 0, 0). Grey images are shown as grey RGB.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/png_writer.h"
#include "engine/io/file_io.h"
#include "engine/random.h"
#include "kernels/common/check.h"
#include "metrics/distance.h"
#include "tools/dml/load_model.h"
#include "tools/dml/output_files.h"
#include "tools/dml/report.h"
#include "tools/dml/split_stream.h"

namespace dml {

namespace {

constexpr int64_t kFrame = 3;
constexpr int64_t kGap = 6;
struct Rgb {
  double r, g, b;
};
constexpr Rgb kBackground{255, 255, 255};
constexpr Rgb kQueryFrame{128, 128, 128};
constexpr Rgb kMatchFrame{0, 170, 0};
constexpr Rgb kMismatchFrame{220, 0, 0};

// An RGB canvas [3, H, W] of values in [0, 1].
struct Canvas {
  int64_t height, width;
  std::vector<double> values;

  Canvas(int64_t h, int64_t w) : height(h), width(w), values(static_cast<size_t>(3 * h * w)) {}
  void set(int64_t y, int64_t x, double r, double g, double b) {
    const size_t plane = static_cast<size_t>(height * width);
    const size_t at = static_cast<size_t>(y * width + x);
    values[at] = r;
    values[plane + at] = g;
    values[2 * plane + at] = b;
  }
  void fill(int64_t y0, int64_t x0, int64_t h, int64_t w, const Rgb& c) {
    for (int64_t y = y0; y < y0 + h; ++y) {
      for (int64_t x = x0; x < x0 + w; ++x) set(y, x, c.r / 255.0, c.g / 255.0, c.b / 255.0);
    }
  }
  // A framed cell at (y0, x0): the frame colour under the whole cell, then the image inside.
  void cell(int64_t y0, int64_t x0, const engine::Tensor& image, int64_t scale, const Rgb& frame) {
    const int64_t channels = image.size(0), h = image.size(1), w = image.size(2);
    fill(y0, x0, scale * h + 2 * kFrame, scale * w + 2 * kFrame, frame);
    const std::vector<double> pixels = image.contiguous().to_vector();
    for (int64_t y = 0; y < scale * h; ++y) {
      for (int64_t x = 0; x < scale * w; ++x) {
        const size_t at = static_cast<size_t>((y / scale) * w + x / scale);
        const size_t plane = static_cast<size_t>(h * w);
        const double r = pixels[at];
        const double g = channels == 3 ? pixels[plane + at] : r;
        const double b = channels == 3 ? pixels[2 * plane + at] : r;
        set(y0 + kFrame + y, x0 + kFrame + x, r, g, b);
      }
    }
  }
};

}  // namespace

int run_report_grid(Args& args) {
  const std::string path = args.take_string("--checkpoint");
  const std::optional<std::string> data_name = args.take_optional("--data");
  const std::string split = args.take_string("--split", "test");
  const std::optional<std::string> root = args.take_optional("--root");
  const std::optional<metrics::Metric> metric_option = take_metric_option(args);
  const int64_t max_images = args.take_int("--max-images", 0);
  const int64_t queries = args.take_int("--queries", 8);
  const int64_t k = args.take_int("--k", 5);
  const int64_t seed = args.take_int("--seed", 0);
  const int64_t scale_option = args.take_int("--scale", 0);
  const int64_t batch_size = args.take_int("--batch-size", 256);
  const std::optional<std::string> device_text = args.take_optional("--device");
  const std::string out = args.take_string("--out");
  args.finish();
  check_replaceable_file(out, "--out");
  if (split != "train" && split != "test") {
    throw UsageError("--split must be train or test, got '" + split + "'");
  }
  if (max_images < 0) throw UsageError("--max-images must be >= 0");
  if (queries < 1) throw UsageError("--queries must be >= 1");
  if (k < 1) throw UsageError("--k must be >= 1");
  if (seed < 0) throw UsageError("--seed must be >= 0");
  if (scale_option < 0 || scale_option > 16) throw UsageError("--scale must be 1..16 (0: auto)");
  if (batch_size <= 0) throw UsageError("--batch-size must be positive");
  const engine::Device device = parse_device_option(device_text);
  const TrainedModel trained = load_trained_model(path, device);
  const metrics::Metric metric = metric_option.value_or(trained.metric);

  const std::string dataset_name = data_name.value_or(trained.data);
  const std::unique_ptr<data::Dataset> dataset = open_data_option(
      dataset_name, split, root.value_or(data_name ? "" : trained.root), trained.transform);
  const int64_t m = max_images > 0 ? std::min(max_images, dataset->size()) : dataset->size();
  if (k > m - 1) {
    throw UsageError("--k " + std::to_string(k) + " needs at least " + std::to_string(k + 1) +
                     " images; " + dataset_name + " " + split + " gives " + std::to_string(m));
  }
  if (queries > m) {
    throw UsageError("--queries " + std::to_string(queries) + " is more than the " +
                     std::to_string(m) + " images");
  }

  // The first m images, their embeddings and the metric's prepared points.
  engine::Shape shape = {m};
  for (int64_t d : dataset->image_shape()) shape.push_back(d);
  ENGINE_CHECK(shape.size() == 4 && (shape[1] == 1 || shape[1] == 3), dataset_name,
               ": the grid needs grey or RGB images, got ", shape[1], " channels");
  // Embedded batch by batch (tools/dml/split_stream.h); only the drawn images are decoded again.
  const std::vector<int64_t> labels = split_labels(*dataset, m);
  const metrics::Points points = metrics::make_points(
      embed_split(*trained.model, *dataset, m, batch_size), metric, "embeddings");
  engine::Generator transform_gen(0);  // test transforms are deterministic
  const auto image = [&](int64_t index) { return dataset->image(index, transform_gen); };

  engine::Generator gen(static_cast<uint64_t>(seed));
  std::vector<int64_t> chosen = engine::permutation_vector(m, gen);
  chosen.resize(static_cast<size_t>(queries));
  std::sort(chosen.begin(), chosen.end());
  const metrics::Points query_points = metrics::gather_points(points, chosen.data(), queries);
  std::vector<float> keys(static_cast<size_t>(queries * m));
  metrics::key_tile(query_points, 0, queries, points, 0, m, keys.data(), m);

  const int64_t h = shape[2], w = shape[3];
  const int64_t scale = scale_option > 0 ? scale_option : (w <= 64 ? 2 : 1);
  const int64_t cell_h = scale * h + 2 * kFrame, cell_w = scale * w + 2 * kFrame;
  Canvas canvas(queries * cell_h + (queries + 1) * kGap, (k + 1) * cell_w + (k + 2) * kGap);
  canvas.fill(0, 0, canvas.height, canvas.width, kBackground);
  int64_t matches = 0;
  for (int64_t r = 0; r < queries; ++r) {
    const int64_t q = chosen[static_cast<size_t>(r)];
    const float* row = keys.data() + r * m;
    std::vector<int64_t> order;
    for (int64_t j = 0; j < m; ++j) {
      if (j != q) order.push_back(j);
    }
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      return row[a] < row[b] || (row[a] == row[b] && a < b);
    });
    const int64_t top = kGap + r * (cell_h + kGap);
    canvas.cell(top, kGap, image(q), scale, kQueryFrame);
    const int64_t label = labels[static_cast<size_t>(q)];
    std::printf("query %lld (label %lld):", static_cast<long long>(q),
                static_cast<long long>(label));
    for (int64_t c = 0; c < k; ++c) {
      const int64_t j = order[static_cast<size_t>(c)];
      const bool match = labels[static_cast<size_t>(j)] == label;
      matches += match;
      canvas.cell(top, kGap + (c + 1) * (cell_w + kGap), image(j), scale,
                  match ? kMatchFrame : kMismatchFrame);
      std::printf(" %lld%s", static_cast<long long>(j), match ? "" : "x");
    }
    std::printf("\n");
  }

  // Atomic like the other outputs: a temporary file renamed over `out`.
  const std::string temp = engine::detail::atomic_temp_path(out);
  try {
    data::write_png(temp,
                    engine::Tensor::from_vector(canvas.values, {3, canvas.height, canvas.width}));
    std::filesystem::rename(temp, out);
  } catch (const std::exception& e) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    engine::fail(out, ": cannot write the PNG: ", e.what());
  }
  std::printf(
      "wrote %s: %lld queries x top-%lld of the first %lld %s %s images (%s, metric %s); "
      "%lld of %lld neighbours share the query's label (x: they do not)\n",
      out.c_str(), static_cast<long long>(queries), static_cast<long long>(k),
      static_cast<long long>(m), dataset_name.c_str(), split.c_str(), trained.config.name.c_str(),
      metrics::metric_name(metric), static_cast<long long>(matches),
      static_cast<long long>(queries * k));
  return 0;
}

}  // namespace dml
