// dml report --attack: a picture of one attack on a few images, as a PNG (docs/report.md).
//
// The first N images of the split are attacked as one batch, exactly as `dml attack --max-images N
// --batch-size N` attacks its first batch with the same --seed (same gallery: every image of the
// split; same random stream, attacks::attack_stream_seed). For each attacked image the picture
// shows its top-K among the gallery before and after the attack (its own clean copy excluded by
// index, ties to the smaller index, metrics/distance.h keys) and the perturbation.
//
// Layout (pixels): a header of kHeaderLines text lines (tools/dml/raster.h, size 1; 9 pixels each
// from y = 6), then a band of column titles, then one row per image. A row holds 2 K + 3 cells of
// (s H + 6) x (s W + 6) pixels, each with a 22-pixel caption band below it, in three groups
// separated by 18 pixels: [clean image, its clean top-K], [adversarial image, its top-K],
// [perturbation]; inside a group cells are 6 pixels apart, and 6 white pixels surround the
// whole. Captions: "clean I" or "adv I" and the class under the attacked image, "#RANK DISTANCE"
// and the class under a neighbour (as in the grid), "xF" under the perturbation; the column
// titles "clean: image, top-K", "adversarial: image, top-K", "delta". Frames as in the grid: the
// attacked image blue, a neighbour of its label green, another red, the perturbation grey. The
// perturbation is shown as 0.5 + F delta with one F for the picture, F = 0.5 / max|delta| over its
// images, so grey is no change and black/white the largest change (written in the header).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "attacks/attack.h"
#include "engine/random.h"
#include "kernels/common/check.h"
#include "losses/distance.h"
#include "metrics/distance.h"
#include "models/embed.h"
#include "tools/dml/attack_setup.h"
#include "tools/dml/output_files.h"
#include "tools/dml/raster.h"
#include "tools/dml/report.h"

namespace dml {

namespace {

using raster::Canvas;
constexpr int64_t kGap = 6;
constexpr int64_t kGroupGap = 18;
constexpr int64_t kHeaderLines = 4;
constexpr raster::Rgb kPerturbationFrame{128, 128, 128};

// keys[i * n + j]: the metric's key between query row i of `queries` and gallery row j.
std::vector<float> all_keys(const metrics::Points& queries, const metrics::Points& gallery) {
  std::vector<float> keys(static_cast<size_t>(queries.n * gallery.n));
  metrics::key_tile(queries, 0, queries.n, gallery, 0, gallery.n, keys.data(), gallery.n);
  return keys;
}

// The options of the picture, checked (UsageError) before anything is loaded.
struct PictureOptions {
  attacks::AttackSpec spec;
  int64_t queries = 4, k = 5, scale = 0;
  std::string out;
  AttackCommonOptions common;
};
PictureOptions take_picture_options(Args& args) {
  PictureOptions o;
  const std::string spec_text = args.take_string("--attack");
  o.queries = args.take_int("--queries", 4);
  o.k = args.take_int("--k", 5);
  o.scale = args.take_int("--scale", 0);
  o.out = args.take_string("--out");
  o.common = take_attack_options(args);
  args.finish();
  check_replaceable_file(o.out, "--out");
  if (o.common.json) throw UsageError("--json: dml report --attack writes a picture, not JSON");
  if (o.common.batch_size != 0) {
    throw UsageError("--batch-size: dml report --attack attacks its --queries images as one batch");
  }
  if (o.common.run.max_images != 0) {
    throw UsageError("--max-images: dml report --attack attacks the first --queries images");
  }
  if (o.queries < 1 || o.queries > 64) throw UsageError("--queries must be 1..64");
  if (o.k < 1 || o.k > 20) throw UsageError("--k must be 1..20");
  if (o.scale < 0 || o.scale > 16) throw UsageError("--scale must be 1..16 (0: auto)");
  try {
    o.spec = attacks::parse_attack_spec(spec_text);
  } catch (const engine::Error& e) {
    throw UsageError(std::string("--attack: ") + e.what());
  }
  o.common.run.max_images = o.queries;
  o.common.batch_size = o.queries;
  return o;
}

// The first `queries` images of the split before and after the attack (on the CPU), attacked as
// run_attack attacks its first batch.
struct Attacked {
  engine::Tensor clean, adversarial;  // [N, C, H, W]
  std::vector<int64_t> rows;          // 0..N-1: their gallery rows (their own clean copies)
};
Attacked attack_first_images(AttackSetup& setup, const attacks::AttackSpec& spec, int64_t queries) {
  const data::Dataset& dataset = *setup.data;
  engine::Shape shape = {queries};
  for (int64_t d : dataset.image_shape()) shape.push_back(d);
  ENGINE_CHECK(shape.size() == 4 && (shape[1] == 1 || shape[1] == 3), setup.dataset,
               ": the picture needs grey or RGB images, got ", shape[1], " channels");
  engine::Generator transform_gen(0);  // test transforms are deterministic
  Attacked a;
  a.clean = engine::Tensor::empty(shape);
  for (int64_t i = 0; i < queries; ++i) {
    a.clean.select(0, i).copy_(dataset.image(i, transform_gen));
    a.rows.push_back(i);
  }
  const std::vector<int64_t> labels(setup.images.labels.begin(),
                                    setup.images.labels.begin() + queries);
  engine::Generator gen(attacks::attack_stream_seed(setup.run.seed, spec));
  attacks::AttackOptions attack_options;
  attack_options.robrank_compat = setup.run.robrank_compat;
  a.adversarial = attacks::attack_batch(*setup.trained.model, a.clean, labels, a.rows,
                                        setup.gallery, spec, gen, attack_options)
                      .adversarial_images.to(engine::Device::cpu());
  return a;
}

// 0.5 + factor (adversarial - clean) with factor = 0.5 / max|delta| (1 when nothing changed).
engine::Tensor magnified_delta(const Attacked& a, double* factor, double* max_delta) {
  const std::vector<double> clean = a.clean.contiguous().to_vector();
  const std::vector<double> adversarial = a.adversarial.contiguous().to_vector();
  *max_delta = 0.0;
  for (size_t i = 0; i < clean.size(); ++i) {
    *max_delta = std::max(*max_delta, std::abs(adversarial[i] - clean[i]));
  }
  *factor = *max_delta > 0.0 ? 0.5 / *max_delta : 1.0;
  std::vector<double> shown(clean.size());
  for (size_t i = 0; i < clean.size(); ++i) shown[i] = 0.5 + *factor * (adversarial[i] - clean[i]);
  return engine::Tensor::from_vector(shown, a.clean.shape());
}

// The header's lines: the attack and eps, the model, the image count and mode, the magnification.
std::vector<std::string> header_lines(const PictureOptions& o, const AttackSetup& setup,
                                      int64_t gallery, double factor, double max_delta) {
  char eps_text[64], factor_text[160];
  std::snprintf(eps_text, sizeof eps_text, "eps %.5g (%.3g/255)", o.spec.pgd.eps,
                255.0 * o.spec.pgd.eps);
  std::snprintf(factor_text, sizeof factor_text,
                "perturbation: 0.5 + %.4g x (adversarial - clean), grey = no change "
                "(max|delta| %.4g)",
                factor, max_delta);
  return {"attack " + attacks::attack_spec_string(o.spec) + ", " + eps_text,
          "model " + o.common.checkpoint + " (" + setup.trained.config.name +
              ", D=" + std::to_string(setup.trained.config.embedding_dim) + "), metric " +
              losses::metric_name(setup.metric),
          std::to_string(o.queries) + " images attacked of " + setup.dataset + " " + setup.split +
              " (gallery " + std::to_string(gallery) + "), robrank_compat " +
              (setup.run.robrank_compat ? "true" : "false") + ", seed " +
              std::to_string(setup.run.seed),
          factor_text};
}

// --queries and --k against the split: a query is one of its images, and it needs k others.
void check_split_fits(const PictureOptions& o, const AttackSetup& setup, int64_t gallery) {
  if (o.queries > gallery) {
    throw UsageError("--queries " + std::to_string(o.queries) + " is more than the " +
                     std::to_string(gallery) + " images of " + setup.dataset + " " + setup.split);
  }
  if (o.k > gallery - 1) {
    throw UsageError("--k " + std::to_string(o.k) + " needs at least " + std::to_string(o.k + 1) +
                     " images; " + setup.dataset + " " + setup.split + " gives " +
                     std::to_string(gallery));
  }
}

}  // namespace

int run_report_attack(Args& args) {
  PictureOptions o = take_picture_options(args);
  AttackSetup setup = setup_attack(o.common);
  complete_spec(o.spec, setup.dataset);
  const int64_t queries = o.queries, k = o.k;
  const int64_t gallery = static_cast<int64_t>(setup.images.labels.size());
  check_split_fits(o, setup, gallery);
  const Attacked attacked = attack_first_images(setup, o.spec, queries);
  const engine::Tensor& images = attacked.clean;
  const engine::Tensor& adversarial = attacked.adversarial;
  double factor = 1.0, max_delta = 0.0;
  const engine::Tensor delta_images = magnified_delta(attacked, &factor, &max_delta);

  // Rankings before and after, against the clean gallery.
  const metrics::Points gallery_points =
      metrics::make_points(setup.gallery.embeddings, setup.metric, "gallery");
  const metrics::Points clean_points =
      metrics::gather_points(gallery_points, attacked.rows.data(), queries);
  const metrics::Points adversarial_points = metrics::make_points(
      models::embed(*setup.trained.model, adversarial), setup.metric, "adversarial embeddings");
  const std::vector<float> clean_keys = all_keys(clean_points, gallery_points);
  const std::vector<float> adversarial_keys = all_keys(adversarial_points, gallery_points);

  // The canvas.
  const raster::CellLayout layout = raster::cell_layout(images.size(2), images.size(3), o.scale);
  const int64_t cell_h = layout.cell_h, cell_w = layout.cell_w, row_h = layout.row_h;
  const int64_t group_w = (k + 1) * cell_w + k * kGap;
  const int64_t header_h = kGap + kHeaderLines * raster::kLineHeight + kGap;
  const int64_t titles_h = raster::kLineHeight + 4;
  const int64_t width = 2 * kGap + 2 * group_w + 2 * kGroupGap + cell_w;
  Canvas canvas(header_h + titles_h + queries * row_h + queries * kGap, width);
  const std::string dataset_id = setup.data->name();
  const std::vector<std::string> header = header_lines(o, setup, gallery, factor, max_delta);
  for (size_t line = 0; line < header.size(); ++line) {
    canvas.text(kGap + static_cast<int64_t>(line) * raster::kLineHeight, kGap,
                raster::fit_text(header[line], 1, width - 2 * kGap), 1, raster::kBlack);
  }
  const int64_t clean_left = kGap, adversarial_left = kGap + group_w + kGroupGap,
                delta_left = adversarial_left + group_w + kGroupGap;
  canvas.text(header_h, clean_left, "clean: image, top-" + std::to_string(k), 1, raster::kBlack);
  canvas.text(header_h, adversarial_left, "adversarial: image, top-" + std::to_string(k), 1,
              raster::kBlack);
  canvas.text(header_h, delta_left, "delta", 1, raster::kBlack);

  engine::Generator transform_gen(0);  // test transforms are deterministic
  const raster::PictureGallery picture_gallery{
      gallery_points, setup.images.labels,
      [&](int64_t j) { return setup.data->image(j, transform_gen); }, dataset_id};
  int64_t clean_matches = 0, adversarial_matches = 0;
  for (int64_t r = 0; r < queries; ++r) {
    const int64_t top = header_h + titles_h + r * (row_h + kGap);
    const int64_t label = setup.images.labels[static_cast<size_t>(r)];
    const std::string name = raster::class_name(dataset_id, label);
    std::printf("image %lld (label %lld):", static_cast<long long>(r),
                static_cast<long long>(label));
    const auto draw_group = [&](int64_t left, const engine::Tensor& query,
                                const metrics::Points& query_points, const float* keys,
                                const char* what) {
      canvas.cell(top, left, query, layout.scale, raster::kQueryFrame);
      canvas.caption(top + cell_h, left, cell_w, what + std::to_string(r), name);
      std::printf(" %s", what);
      return raster::draw_neighbours(canvas, layout, top, left, kGap, picture_gallery, query_points,
                                     r, keys, r, k, label);
    };
    clean_matches += draw_group(clean_left, images.select(0, r), clean_points,
                                clean_keys.data() + r * gallery, "clean ");
    adversarial_matches +=
        draw_group(adversarial_left, adversarial.select(0, r), adversarial_points,
                   adversarial_keys.data() + r * gallery, "adv ");
    canvas.cell(top, delta_left, delta_images.select(0, r), layout.scale, kPerturbationFrame);
    canvas.caption(top + cell_h, delta_left, cell_w, "x" + raster::short_number(factor), "");
    std::printf("\n");
  }
  raster::write_canvas_png(o.out, canvas);
  std::printf(
      "wrote %s: %s on %lld images of %s %s (gallery %lld); top-%lld neighbours sharing the "
      "image's label: %lld clean, %lld adversarial of %lld (x: they do not)\n",
      o.out.c_str(), attacks::attack_spec_string(o.spec).c_str(), static_cast<long long>(queries),
      setup.dataset.c_str(), setup.split.c_str(), static_cast<long long>(gallery),
      static_cast<long long>(k), static_cast<long long>(clean_matches),
      static_cast<long long>(adversarial_matches), static_cast<long long>(queries * k));
  return 0;
}

}  // namespace dml
