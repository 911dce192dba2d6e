// dml train: train an embedding model from a JSON config (docs/config.md).
//
//   dml train --config FILE.json [--set key.sub=value]... [--resume] [--seed N]
//             [--device cpu|cuda] [--stop-after-batches N] [--print-config]
//
// Writes <output_dir>/{log.jsonl, log.csv, tensorboard/, checkpoint.safetensors, model.safetensors,
// metrics.json} and prints the evaluation table at the end. The loop: trainer.h; the checkpoint
// format: train_checkpoint.h.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/precision.h"
#include "tools/dml/commands.h"
#include "tools/dml/config.h"
#include "tools/dml/distributed.h"
#include "tools/dml/trainer.h"

namespace dml {

namespace {

const char kUsage[] =
    "usage: dml train --config FILE.json [options]\n"
    "\n"
    "Trains a model as the config says (keys: docs/config.md) and evaluates it on the test split.\n"
    "Losses (loss.name): triplet, contrastive, margin, multi_similarity, arcface, lifted, npair;\n"
    "per-parameter learning rates: optimizer.groups.\n"
    "\n"
    "  --config FILE         JSON config (unknown keys and wrong types are errors)\n"
    "  --set KEY=VALUE       override one key, e.g. --set optimizer.lr=0.01 --set loss.miner=\n"
    "                        semihard (VALUE parsed as JSON when it is JSON, else a string);\n"
    "                        repeatable\n"
    "  --seed N              same as --set seed=N\n"
    "  --device DEV          same as --set device=DEV (auto, cpu, cuda, cuda:N)\n"
    "  --resume              continue from <output_dir>/checkpoint.safetensors, bit-identically\n"
    "  --overwrite           start afresh even if output_dir already holds a run (default: "
    "refuse,\n"
    "                        so an earlier run's checkpoint is never lost by accident)\n"
    "  --stop-after-batches N  write a checkpoint after N steps and exit (resume testing)\n"
    "  --print-config        print the resolved config (every key, defaults filled in, --set\n"
    "                        applied) as JSON and exit without training\n"
    "\n"
    "Outputs in output_dir: log.jsonl (one JSON object per logged step and evaluation), the\n"
    "same as log.csv and as TensorBoard scalars in tensorboard/ (tensorboard --logdir DIR),\n"
    "checkpoint.safetensors (model, optimizer, sampler and RNG state; written atomically),\n"
    "model.safetensors (final weights), metrics.json (final evaluation).\n";

}  // namespace

int run_train(Args& args) {
  if (args.take_flag("--help") || args.take_flag("-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string path = args.take_string("--config");
  std::vector<std::string> sets = args.take_all("--set");
  const std::optional<std::string> seed = args.take_optional("--seed");
  const std::optional<std::string> device = args.take_optional("--device");
  TrainOptions options;
  options.resume = args.take_flag("--resume");
  const bool overwrite = args.take_flag("--overwrite");
  options.stop_after_batches = args.take_int("--stop-after-batches", 0);
  const bool print_config = args.take_flag("--print-config");
  args.finish();
  if (options.stop_after_batches < 0) throw UsageError("--stop-after-batches must be >= 0");

  nlohmann::json config = load_config_file(path);
  if (seed) sets.push_back("seed=" + *seed);
  if (device) sets.push_back("device=\"" + *device + "\"");
  // --precision (taken for every subcommand, tools/dml/args.cpp) wins over the config key.
  if (engine::precision_is_set()) {
    sets.push_back(std::string("precision=\"") + engine::precision_name(engine::precision()) +
                   "\"");
  }
  for (const std::string& assignment : sets) apply_override(config, assignment);
  TrainConfig resolved = resolve_config(config, path);
  if (print_config) {
    if (writes_results()) std::printf("%s\n", resolved.resolved.dump(2).c_str());
    return 0;
  }
  if (options.resume && overwrite) throw UsageError("--resume and --overwrite exclude each other");
  // A finished run whose checkpoint was deleted still has its weights: a fresh run would remove
  // them (training_run.cpp, prepare_output_dir), so it needs --overwrite as well.
  for (const std::string& held :
       {checkpoint_path(resolved.output_dir),
        (std::filesystem::path(resolved.output_dir) / "model.safetensors").string()}) {
    if (!options.resume && !overwrite && std::filesystem::exists(held)) {
      throw UsageError("output_dir '" + resolved.output_dir + "' already holds a run (" +
                       std::filesystem::path(held).filename().string() +
                       "); pass --resume to continue it, --overwrite to start afresh, or --set "
                       "output_dir=ANOTHER_DIR");
    }
  }
  return train(resolved, options);
}

}  // namespace dml
