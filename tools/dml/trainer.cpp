// The training loop of `dml train` (design: trainer.h; its concerns: training_run.h; its
// checkpoint: train_checkpoint.h) and what `dml train` shares with `dml eval` and `dml bench`.
#include "tools/dml/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "engine/precision.h"
#include "kernels/common/check.h"
#include "tools/dml/split_stream.h"
#include "tools/dml/training_run.h"
#include "tools/dml/version.h"

namespace dml {

std::string format_duration(double seconds) {
  // Capped at 10^6 hours so llround stays defined; NaN and negatives read as 0.
  const double clamped = std::isfinite(seconds) ? std::min(std::max(seconds, 0.0), 3.6e9) : 0.0;
  const long long total = static_cast<long long>(std::llround(clamped));
  char text[32];
  if (total < 60) {
    std::snprintf(text, sizeof text, "%llds", total);
  } else if (total < 3600) {
    std::snprintf(text, sizeof text, "%lldm%02llds", total / 60, total % 60);
  } else {
    std::snprintf(text, sizeof text, "%lldh%02lldm", total / 3600, total % 3600 / 60);
  }
  return text;
}

std::string checkpoint_path(const std::string& output_dir) {
  return (std::filesystem::path(output_dir) / "checkpoint.safetensors").string();
}

nlohmann::json model_metadata(const TrainConfig& config) {
  return {{"name", config.model.name},
          {"embedding_dim", config.model.embedding_dim},
          {"bn_branches", config.model.bn_branches},
          {"data", config.data_name},
          {"root", config.data_root},
          {"transform", config.data_transform},
          {"metric", losses::metric_name(config.metric)},
          {"precision", engine::precision_name(config.precision)},
          {"dml_commit", build_commit()}};
}

metrics::Evaluation evaluate_model(models::Model& model, const data::Dataset& test,
                                   const EvalSettings& settings) {
  int64_t n = test.size();
  if (settings.max_images > 0) n = std::min(n, settings.max_images);
  ENGINE_CHECK(n > 0, "evaluation: the ", test.name(), " ", test.split(), " split is empty");
  const std::vector<int64_t> labels = split_labels(test, n);
  ImageProgress progress("eval", n);
  const engine::Tensor embeddings =
      embed_split(model, test, n, settings.batch_size, [&](int64_t done, int64_t) {
        if (settings.progress) progress.update(done);
      });
  const metrics::Metric metric = settings.metric;
  const metrics::Points points = metrics::make_points(embeddings, metric, "evaluation embeddings");
  metrics::EvaluationOptions options;
  options.kmeans_seed = settings.seed;
  options.kmeans_restarts = settings.kmeans_restarts;
  options.retrieval.device = settings.device;
  return metrics::evaluate_embeddings(points, labels, options);
}

void print_ranking_rows(const metrics::Evaluation& e) {
  std::printf("%-12s %8s\n", "metric", "%");
  for (size_t i = 0; i < e.retrieval.ks.size(); ++i) {
    const std::string name = "recall@" + std::to_string(e.retrieval.ks[i]);
    std::printf("%-12s %8.2f\n", name.c_str(), 100.0 * e.retrieval.recall[i]);
  }
  std::printf("%-12s %8.2f\n", "map", 100.0 * e.retrieval.map);
  std::printf("%-12s %8.2f\n", "map_at_r10", 100.0 * e.retrieval.map_at_r10);
  std::printf("%-12s %8.2f\n", "map_at_r", 100.0 * e.retrieval.map_at_r);
  std::printf("%-12s %8.2f\n", "r_precision", 100.0 * e.retrieval.r_precision);
  std::printf("%-12s %8.2f\n", "mrr", 100.0 * e.retrieval.mrr);
}

void print_class_average_rows(const metrics::Evaluation& e) {
  const metrics::ClassAverages& c = e.retrieval.per_class;
  std::printf("\n%-12s %8s   (PML avg_of_avgs: the mean per class, then over %lld classes)\n",
              "per class", "%", static_cast<long long>(c.classes));
  std::printf("%-12s %8.2f\n", "recall@1", 100.0 * c.precision_at_1);
  std::printf("%-12s %8.2f\n", "map", 100.0 * c.map);
  std::printf("%-12s %8.2f\n", "map_at_r", 100.0 * c.map_at_r);
  std::printf("%-12s %8.2f\n", "r_precision", 100.0 * c.r_precision);
  std::printf("%-12s %8.2f\n", "mrr", 100.0 * c.mrr);
}

void print_metrics_table(const metrics::Evaluation& e, const std::string& title) {
  std::printf("%s: %lld images in %lld classes, metric %s, %lld queries scored\n\n", title.c_str(),
              static_cast<long long>(e.n), static_cast<long long>(e.classes),
              metrics::metric_name(e.metric), static_cast<long long>(e.retrieval.queries));
  print_ranking_rows(e);
  std::printf("%-12s %8.2f\n", "nmi", 100.0 * e.nmi);
  std::printf("%-12s %8.4f   (ratio, not %%)\n", "pi_ratio", e.spread.ratio);
  print_class_average_rows(e);
}

// The training loop; each concern is a method of TrainingRun (training_run.h).
int train(const TrainConfig& config, const TrainOptions& options) {
  // The run's precision policy (engine/precision.h), checked before anything is written (every
  // precision has kernels today; check_precision_implemented is where a refusal would go).
  engine::check_precision_implemented(config.precision, "config key 'precision'");
  engine::set_precision(config.precision);
  TrainingRun run(config, options);  // set-up; --resume restores the checkpoint
  for (int64_t epoch = run.cursor().epoch; epoch < config.epochs; ++epoch) {
    const int64_t first = run.cursor().batch;
    if (first < run.batches_per_epoch()) {
      data::BatchLoader loader(run.train_set(), run.rest_of_epoch(first),
                               run.loader_options(epoch, first));
      data::Batch batch;
      ProgressWindow window;
      while (loader.next(batch)) {  // sample
        const StepOutcome step = run.step(batch, epoch);
        window.images += step.images;
        if (run.progress_due(batch)) run.log_progress(epoch, batch, step, window);
        if (batch.number + 1 == run.batches_per_epoch()) break;  // the epoch's end follows
        if (run.stop_requested() || run.checkpoint_due()) run.save_checkpoint();
        if (run.stop_requested()) return run.stop();
      }
    }
    run.advance_to_next_epoch(epoch);
    if (run.evaluation_due(epoch)) run.evaluate(epoch);
    run.save_checkpoint();
    if (run.stop_requested() && epoch + 1 < config.epochs) return run.stop();
  }
  return run.finish();
}

}  // namespace dml
