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
// H x W, a cell is (s H + 6) x (s W + 6) with a 22-pixel caption band below it (two lines of
// tools/dml/raster.h text from 3 pixels down: "query Q" or "#RANK DISTANCE", then the class name),
// and the PNG (RGB) is
//   width  = (K + 1) (s W + 6) + (K + 2) 6,   height = N (s H + 28) + (N + 1) 6.
// Frames: query blue (0, 90, 255); a neighbour with the query's label green (0, 170, 0),
// otherwise red (220, 0, 0). Grey images are shown as grey RGB.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "engine/io/file_io.h"
#include "engine/random.h"
#include "kernels/common/check.h"
#include "metrics/distance.h"
#include "tools/dml/load_model.h"
#include "tools/dml/output_files.h"
#include "tools/dml/raster.h"
#include "tools/dml/report.h"
#include "tools/dml/split_stream.h"

namespace dml {

namespace {

using raster::Canvas;
constexpr int64_t kGap = 6;

// The command line of `dml report --grid`, read and checked before any work.
struct GridOptions {
  std::string checkpoint, out;
  SplitOptions split;
  std::optional<std::string> device;
  std::optional<metrics::Metric> metric;
  int64_t max_images = 0, queries = 0, k = 0, seed = 0, scale = 0, batch_size = 0;
};

GridOptions take_grid_options(Args& args) {
  GridOptions o;
  o.checkpoint = args.take_string("--checkpoint");
  o.split = take_split_options(args, "test");
  o.metric = take_metric_option(args);
  o.max_images = args.take_int("--max-images", 0);
  o.queries = args.take_int("--queries", 8);
  o.k = args.take_int("--k", 5);
  o.seed = args.take_int("--seed", 0);
  o.scale = args.take_int("--scale", 0);
  o.batch_size = args.take_int("--batch-size", 256);
  o.device = args.take_optional("--device");
  o.out = args.take_string("--out");
  args.finish();
  check_replaceable_file(o.out, "--out");
  if (o.max_images < 0) throw UsageError("--max-images must be >= 0");
  if (o.queries < 1) throw UsageError("--queries must be >= 1");
  if (o.k < 1) throw UsageError("--k must be >= 1");
  if (o.seed < 0) throw UsageError("--seed must be >= 0");
  if (o.scale < 0 || o.scale > 16) throw UsageError("--scale must be 1..16 (0: auto)");
  if (o.batch_size <= 0) throw UsageError("--batch-size must be positive");
  return o;
}

}  // namespace

int run_report_grid(Args& args) {
  const GridOptions o = take_grid_options(args);
  const int64_t queries = o.queries, k = o.k;
  const engine::Device device = parse_device_option(o.device);
  const TrainedModel trained = load_trained_model(o.checkpoint, device);
  const metrics::Metric metric = o.metric.value_or(trained.metric);

  const std::string dataset_name = o.split.dataset_name(trained);
  const std::unique_ptr<data::Dataset> dataset = open_split(o.split, trained);
  const int64_t m = o.max_images > 0 ? std::min(o.max_images, dataset->size()) : dataset->size();
  if (k > m - 1) {
    throw UsageError("--k " + std::to_string(k) + " needs at least " + std::to_string(k + 1) +
                     " images; " + dataset_name + " " + o.split.split + " gives " +
                     std::to_string(m));
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
      embed_split(*trained.model, *dataset, m, o.batch_size), metric, "embeddings");
  engine::Generator transform_gen(0);  // test transforms are deterministic
  const auto image = [&](int64_t index) { return dataset->image(index, transform_gen); };

  engine::Generator gen(static_cast<uint64_t>(o.seed));
  std::vector<int64_t> chosen = engine::permutation_vector(m, gen);
  chosen.resize(static_cast<size_t>(queries));
  std::sort(chosen.begin(), chosen.end());
  const metrics::Points query_points = metrics::gather_points(points, chosen.data(), queries);
  std::vector<float> keys(static_cast<size_t>(queries * m));
  metrics::key_tile(query_points, 0, queries, points, 0, m, keys.data(), m);

  const raster::CellLayout layout = raster::cell_layout(shape[2], shape[3], o.scale);
  Canvas canvas(queries * layout.row_h + (queries + 1) * kGap,
                (k + 1) * layout.cell_w + (k + 2) * kGap);
  const raster::PictureGallery gallery{points, labels, image, dataset->name()};
  int64_t matches = 0;
  for (int64_t r = 0; r < queries; ++r) {
    const int64_t q = chosen[static_cast<size_t>(r)];
    const int64_t top = kGap + r * (layout.row_h + kGap);
    const int64_t label = labels[static_cast<size_t>(q)];
    canvas.cell(top, kGap, image(q), layout.scale, raster::kQueryFrame);
    canvas.caption(top + layout.cell_h, kGap, layout.cell_w, "query " + std::to_string(q),
                   raster::class_name(gallery.dataset, label));
    std::printf("query %lld (label %lld):", static_cast<long long>(q),
                static_cast<long long>(label));
    matches += raster::draw_neighbours(canvas, layout, top, kGap, kGap, gallery, query_points, r,
                                       keys.data() + r * m, q, k, label);
    std::printf("\n");
  }

  raster::write_canvas_png(o.out, canvas);
  std::printf(
      "wrote %s: %lld queries x top-%lld of the first %lld %s %s images (%s, metric %s); "
      "%lld of %lld neighbours share the query's label (x: they do not)\n",
      o.out.c_str(), static_cast<long long>(queries), static_cast<long long>(k),
      static_cast<long long>(m), dataset_name.c_str(), o.split.split.c_str(),
      trained.config.name.c_str(), metrics::metric_name(metric), static_cast<long long>(matches),
      static_cast<long long>(queries * k));
  return 0;
}

}  // namespace dml
