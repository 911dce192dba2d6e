// dml eval: benign retrieval metrics of a trained model on a dataset split (docs/architecture.md).
//
//   dml eval --checkpoint FILE [--data NAME] [--split test] [--root DIR] [--json]
//            [--device DEV] [--max-images N] [--metric N|E|C] [--batch-size B] [--seed S]
//
// FILE is a `dml train` output: checkpoint.safetensors (config in its dml_checkpoint metadata)
// or model.safetensors (dml_model metadata). Model, dataset and metric default to the ones it
// was trained with. The JSON keys are those of `dml metrics` (metrics::metrics_json).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "engine/device.h"
#include "engine/precision.h"
#include "kernels/common/check.h"
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
    "  --device DEV        cpu, cuda or cuda:N (default: cuda when a GPU is present)\n"
    "  --json              one JSON object with the keys of `dml metrics --json`\n"
    "  --bn-branch K       evaluate through BN branch K of a K-branch model (default 0)\n";

}  // namespace

int run_eval(Args& args) {
  if (args.take_flag("--help") || args.take_flag("-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string path = args.take_string("--checkpoint");
  const std::optional<std::string> data_name = args.take_optional("--data");
  const std::string split = args.take_string("--split", "test");
  const std::optional<std::string> root = args.take_optional("--root");
  const std::optional<metrics::Metric> metric = take_metric_option(args);
  EvalSettings settings;
  settings.max_images = args.take_int("--max-images", 0);
  settings.batch_size = args.take_int("--batch-size", 256);
  const int64_t seed = args.take_int("--seed", 0);
  const std::optional<std::string> device_text = args.take_optional("--device");
  const bool json = args.take_flag("--json");
  const int64_t bn_branch = args.take_int("--bn-branch", 0);
  args.finish();
  if (split != "train" && split != "test") {
    throw UsageError("--split must be train or test, got '" + split + "'");
  }
  if (settings.max_images < 0) throw UsageError("--max-images must be >= 0");
  if (settings.batch_size <= 0) throw UsageError("--batch-size must be positive");
  if (seed < 0) throw UsageError("--seed must be >= 0");
  settings.seed = static_cast<uint64_t>(seed);
  const engine::Device device = parse_device_option(device_text);
  const TrainedModel trained = load_trained_model(path, device);
  select_bn_branch(*trained.model, trained.config.bn_branches, bn_branch);
  settings.metric = metric.value_or(trained.metric);
  models::Model& model = *trained.model;

  const std::string dataset_name = data_name.value_or(trained.data);
  const std::unique_ptr<data::Dataset> dataset = open_data_option(
      dataset_name, split, root.value_or(data_name ? "" : trained.root), trained.transform);
  const metrics::Evaluation e = evaluate_model(model, *dataset, settings);
  if (!writes_results()) return 0;  // several MPI ranks: rank 0 prints (docs/distributed.md)
  if (json) {
    std::printf("%s\n", metrics::metrics_json(e).dump().c_str());
  } else {
    std::printf("checkpoint  %s (%s, D=%lld) on %s\n", path.c_str(), trained.config.name.c_str(),
                static_cast<long long>(trained.config.embedding_dim), device.str().c_str());
    std::printf("precision   trained in %s, evaluated in %s\n", trained.precision.c_str(),
                engine::precision_name(engine::precision()));
    print_metrics_table(e, dataset_name + " " + split);
  }
  return 0;
}

}  // namespace dml
