// dml eval: benign retrieval metrics of a trained model on a dataset split (docs/architecture.md).
//
//   dml eval --checkpoint FILE [--data NAME] [--split test] [--root DIR] [--json]
//            [--device DEV] [--max-images N] [--metric N|E|C] [--batch-size B] [--seed S]
//            [--images FILE.npy]
//
// FILE is a `dml train` output: checkpoint.safetensors (config in its dml_checkpoint metadata)
// or model.safetensors (dml_model metadata). Model, dataset and metric default to the ones it
// was trained with. The JSON keys are those of `dml metrics` (metrics::metrics_json).
// --images evaluates the split with every image replaced by row i of an .npy file, its labels
// kept: the adversarial set that `dml attack --save-adversarial` writes, evaluated as the clean
// one (query set = gallery = the adversarial set), which is how MDProp scores a model under
// attack (its Table 1; docs/defenses.md).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "engine/device.h"
#include "engine/io/npy.h"
#include "engine/precision.h"
#include "kernels/common/check.h"
#include "models/embed.h"
#include "models/registry.h"
#include "tools/dml/commands.h"
#include "tools/dml/distributed.h"
#include "tools/dml/load_model.h"
#include "tools/dml/split_stream.h"
#include "tools/dml/trainer.h"

namespace dml {

namespace {

const char kUsage[] =
    "usage: dml eval --checkpoint FILE [options]\n"
    "\n"
    "Benign metrics (recall@1/2/4, map, map_at_r10, map_at_r, nmi, pi_ratio, r_precision, mrr,\n"
    "and PML's per-class averages; docs/metrics.md) of a model trained by `dml train`, over a\n"
    "whole split (query set = gallery = the split).\n"
    "\n"
    "  --checkpoint FILE   <output_dir>/checkpoint.safetensors or <output_dir>/model.safetensors\n"
    "  --data NAME         dataset (default: the one trained on)\n"
    "  --split SPLIT       train or test (default test)\n"
    "  --root DIR          the dataset's directory (default: the training config's data.root)\n"
    "  --metric N|E|C      distance (default: the training loss metric)\n"
    "  --max-images N      only the first N images (default 0 = all)\n"
    "  --batch-size B      images per forward pass (default 256)\n"
    "  --seed S            k-means++ seed for NMI (default 0; dml train uses its config seed)\n"
    "  --kmeans-restarts R NMI from the least-inertia of R k-means++ runs seeded S, S+1, ...\n"
    "                      (default 1: one run, as robrank and PML; docs/metrics.md)\n"
    "  --device DEV        cpu, cuda or cuda:N (default: cuda when a GPU is present); the\n"
    "                      embedding and the ranking (recall, mAP) run there\n"
    "  --json              one JSON object with the keys of `dml metrics --json`\n"
    "  --bn-branch K       evaluate through BN branch K of a K-branch model (default 0)\n"
    "  --images FILE.npy   the split with its images replaced by this file's, labels kept:\n"
    "                      float32 [N, C, H, W] in [0, 1], row i = image i, N = the split's\n"
    "                      size (or --max-images); e.g. dml attack --save-adversarial's\n"
    "                      adversarial set (MDProp's evaluation under attack, docs/defenses.md)\n";

// A split whose images come from an array (row i = image i) and whose labels, name and classes
// stay the split's: `--images`.
class ReplacedImages : public data::Dataset {
 public:
  ReplacedImages(std::unique_ptr<data::Dataset> split, engine::Tensor images)
      : split_(std::move(split)), images_(std::move(images)) {}
  std::string name() const override { return split_->name(); }
  std::string split() const override { return split_->split(); }
  int64_t size() const override { return images_.size(0); }
  int64_t num_classes() const override { return split_->num_classes(); }
  int64_t label(int64_t index) const override { return split_->label(index); }
  engine::Tensor image(int64_t index, engine::Generator&) const override {
    return images_.select(0, index).clone();
  }
  engine::Shape image_shape() const override { return split_->image_shape(); }

 private:
  std::unique_ptr<data::Dataset> split_;
  engine::Tensor images_;  // f32 [N, C, H, W] on the CPU
};

// `--images FILE`: the array, checked against the split (shape, row count, pixels) and the
// model's input, in place of the split's images. `rows` is the number of images evaluated.
std::unique_ptr<data::Dataset> replace_images(std::unique_ptr<data::Dataset> split,
                                              const std::string& path, int64_t rows,
                                              const models::Model& model) {
  engine::Tensor images = engine::load_npy(path);
  ENGINE_CHECK(engine::is_floating(images.dtype()), path, ": holds integers (", images.str(),
               "); --images wants float32 pixels in [0, 1]");
  const engine::Shape image_shape = split->image_shape();
  ENGINE_CHECK(images.dim() == 4 && images.shape()[1] == image_shape[0] &&
                   images.shape()[2] == image_shape[1] && images.shape()[3] == image_shape[2],
               path, ": expected images of ", split->name(), ", [N, ", image_shape[0], ", ",
               image_shape[1], ", ", image_shape[2], "], got ", images.str());
  ENGINE_CHECK(images.size(0) == rows, path, ": holds ", images.size(0), " images where the ",
               split->name(), " ", split->split(), " evaluation takes ", rows,
               " (the split's size, or --max-images: give --max-images ", images.size(0),
               " for its first ", images.size(0), ")");
  images = images.to(engine::DType::F32);
  models::check_pixels(images, path);
  model.check_input(images);
  return std::make_unique<ReplacedImages>(std::move(split), images);
}

}  // namespace

int run_eval(Args& args) {
  if (args.take_flag("--help") || args.take_flag("-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string path = args.take_string("--checkpoint");
  const SplitOptions split = take_split_options(args, "test");
  const std::optional<metrics::Metric> metric = take_metric_option(args);
  EvalSettings settings;
  settings.max_images = args.take_int("--max-images", 0);
  settings.batch_size = args.take_int("--batch-size", 256);
  const int64_t seed = args.take_int("--seed", 0);
  settings.kmeans_restarts = args.take_int("--kmeans-restarts", 1);
  const std::optional<std::string> device_text = args.take_optional("--device");
  const bool json = args.take_flag("--json");
  const int64_t bn_branch = args.take_int("--bn-branch", 0);
  const std::optional<std::string> images = args.take_optional("--images");
  args.finish();
  if (images) require_input_file(*images, "--images");
  if (settings.max_images < 0) throw UsageError("--max-images must be >= 0");
  if (settings.batch_size <= 0) throw UsageError("--batch-size must be positive");
  if (seed < 0) throw UsageError("--seed must be >= 0");
  if (settings.kmeans_restarts < 1) throw UsageError("--kmeans-restarts must be >= 1");
  settings.seed = static_cast<uint64_t>(seed);
  const engine::Device device = parse_device_option(device_text);
  const TrainedModel trained = load_trained_model(path, device);
  settings.device = device;
  settings.progress = true;  // rank 0 only (embed_split)
  select_bn_branch(*trained.model, trained.config.bn_branches, bn_branch);
  settings.metric = metric.value_or(trained.metric);
  models::Model& model = *trained.model;

  std::unique_ptr<data::Dataset> dataset = open_split(split, trained);
  if (images) {
    const int64_t rows =
        settings.max_images > 0 ? std::min(settings.max_images, dataset->size()) : dataset->size();
    dataset = replace_images(std::move(dataset), *images, rows, model);
  }
  const metrics::Evaluation e = evaluate_model(model, *dataset, settings);
  if (!writes_results()) return 0;  // several MPI ranks: rank 0 prints (docs/distributed.md)
  if (json) {
    std::printf("%s\n", metrics::metrics_json(e).dump().c_str());
  } else {
    std::printf("checkpoint  %s (%s, D=%lld) on %s\n", path.c_str(), trained.config.name.c_str(),
                static_cast<long long>(trained.config.embedding_dim), device.str().c_str());
    std::printf("precision   trained in %s, evaluated in %s\n",
                engine::precision_name(trained.precision),
                engine::precision_name(engine::precision()));
    std::printf("ranking     on %s, %.2f s (k-means for NMI %.2f s)\n",
                e.retrieval.device.str().c_str(), e.seconds_retrieval, e.seconds_clustering);
    print_metrics_table(e, split.dataset_name(trained) + " " + split.split +
                               (images ? ", images of " + *images : ""));
  }
  return 0;
}

}  // namespace dml
