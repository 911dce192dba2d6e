// Shared set-up of `dml attack` and `dml ers` (header: tools/dml/attack_setup.h).
#include "tools/dml/attack_setup.h"

#include <chrono>
#include <cstdio>

#include "kernels/common/check.h"
#include "losses/distance.h"
#include "models/embed.h"
#include "tools/dml/split_stream.h"

namespace dml {

namespace {
constexpr int64_t kGalleryBatch = 256;  // images per forward when embedding the gallery
}  // namespace

const char kAttackCommonUsage[] =
    "  --checkpoint FILE   <output_dir>/checkpoint.safetensors or model.safetensors of `dml "
    "train`\n"
    "  --data NAME         dataset (default: the one trained on)\n"
    "  --split SPLIT       test or train (default test): queries and gallery\n"
    "  --root DIR          the dataset's directory (default: the training config's)\n"
    "  --metric N|E|C      distance (default: the training loss metric)\n"
    "  --batch-size B      images attacked at once (default 128 for 28x28 models, 112 for 224)\n"
    "  --max-images N      attack only the first N images (default 0 = all; gallery stays whole)\n"
    "  --seed S            seed of the random query/candidate/target choices (default 0)\n"
    "  --robrank-compat    GTM target index, LTM self mask and SP-QA's batch-wide xi as\n"
    "                      robrank (to compare numbers; docs/attacks.md)\n"
    "  --device DEV        cpu, cuda or cuda:N (default: cuda when a GPU is present)\n"
    "  --json              print one JSON object\n"
    "  --bn-branch K       evaluate through BN branch K of a K-branch model (default 0)\n";

AttackCommonOptions take_attack_options(Args& args) {
  AttackCommonOptions o;
  o.checkpoint = args.take_string("--checkpoint");
  o.split = take_split_options(args, "test");
  o.metric = take_metric_option(args);
  o.batch_size = args.take_int("--batch-size", 0);
  o.run.max_images = args.take_int("--max-images", 0);
  const int64_t seed = args.take_int("--seed", 0);
  o.run.robrank_compat = args.take_flag("--robrank-compat");
  o.device = args.take_optional("--device");
  o.json = args.take_flag("--json");
  o.bn_branch = args.take_int("--bn-branch", 0);
  if (o.batch_size < 0) throw UsageError("--batch-size must be positive");
  if (o.run.max_images < 0) throw UsageError("--max-images must be >= 0");
  if (seed < 0) throw UsageError("--seed must be >= 0");
  o.run.seed = static_cast<uint64_t>(seed);
  return o;
}

AttackSetup setup_attack(const AttackCommonOptions& o) {
  AttackSetup setup;
  setup.split = o.split.split;
  setup.run = o.run;
  setup.json = o.json;
  setup.device = parse_device_option(o.device);
  const std::string path = o.checkpoint;
  const int64_t batch_size = o.batch_size;
  setup.trained = load_trained_model(path, setup.device);
  select_bn_branch(*setup.trained.model, setup.trained.config.bn_branches, o.bn_branch);
  setup.bn_branch = o.bn_branch;
  setup.metric = o.metric.value_or(setup.trained.metric);
  const bool large =
      setup.trained.model->input_shape().size() == 3 && setup.trained.model->input_shape()[1] != 28;
  setup.run.batch_size = batch_size > 0 ? batch_size : (large ? 112 : 128);

  setup.dataset = o.split.dataset_name(setup.trained);
  setup.data = open_split(o.split, setup.trained);
  const auto start = std::chrono::steady_clock::now();
  setup.images = split_images(*setup.data);
  const int64_t n = static_cast<int64_t>(setup.images.labels.size());
  setup.gallery = attacks::gallery_from_embeddings(
      embed_split(*setup.trained.model, *setup.data, n, kGalleryBatch), setup.images.labels,
      setup.metric, models::module_device(*setup.trained.model));
  std::fprintf(stderr, "gallery: %lld %s %s images embedded (%s, metric %s) in %.1fs\n",
               static_cast<long long>(setup.images.labels.size()), setup.dataset.c_str(),
               setup.split.c_str(), setup.trained.config.name.c_str(),
               losses::metric_name(setup.metric),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return setup;
}

void complete_spec(attacks::AttackSpec& spec, const std::string& dataset) {
  if (spec.kind == attacks::AttackKind::SPQA && spec.zeta <= 0.0) {
    spec.zeta = attacks::default_zeta(dataset);
  }
}

}  // namespace dml
