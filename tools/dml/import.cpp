// dml import: bare weights (a torch.save checkpoint or safetensors file, e.g. the models the
// papers' authors published) written as a `dml` model file, so that eval, attack, ers, report and
// hardness take them with --checkpoint like a model of `dml train`.
//
//   dml import --model NAME --embedding-dim D --weights FILE [--layout dml|robrank]
//              --data NAME [--root DIR] [--transform R] [--metric N|E|C] [--bn-branches K]
//              [--trained-precision fp32|tf32|bf16] --out model.safetensors [--overwrite]
//
// The weights go through models/weights.h (every key checked, one error for all mismatches); the
// file written is what `dml train` writes as <output_dir>/model.safetensors: the weights under
// their own names and the dml_model metadata (tools/dml/trainer.h, model_metadata) saying which
// model, data and metric the commands that read it should assume.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/transforms.h"
#include "engine/precision.h"
#include "engine/text.h"
#include "kernels/common/check.h"
#include "models/registry.h"
#include "models/weights.h"
#include "tools/dml/commands.h"
#include "tools/dml/config.h"
#include "tools/dml/load_model.h"
#include "tools/dml/output_files.h"
#include "tools/dml/trainer.h"

namespace dml {

namespace {

// The usage around the list of data sets, which is data::dataset_names() (usage()).
const char kUsageToData[] =
    "usage: dml import --model NAME --embedding-dim D --weights FILE --data NAME\n"
    "                  --out model.safetensors [options]\n"
    "\n"
    "Writes bare weights (e.g. a paper's published checkpoint) as a dml model file, which\n"
    "dml eval, attack, ers, report and hardness read with --checkpoint.\n"
    "\n"
    "  --model NAME         c2f2, c2f2-bn, resnet18, resnet34, resnet50, resnet101, resnet152\n"
    "  --embedding-dim D    the model's embedding dimension (must match the weights)\n"
    "  --bn-branches K      batch-norm branches of the weights (default 1)\n"
    "  --weights FILE       safetensors, or a torch.save .pth/.pt/.ckpt (its state dict)\n"
    "  --layout L           the file's names: dml (ours = torchvision's; default) or robrank\n"
    "                       (Zhou et al.'s Lightning checkpoints: the network under backbone.,\n"
    "                       C2F2 as backbone.0/.3/.7/.9)\n"
    "  --data NAME          the data set the model was trained for, the default of the\n"
    "                       commands that read the file: ";
const char kUsageFromData[] =
    "\n"
    "  --root DIR           that data set's directory (default: its default place)\n"
    "  --transform R        its image recipe: robrank (default) or revisiting\n"
    "  --metric N|E|C       the distance it was trained with (default N)\n"
    "  --trained-precision P  the precision it was trained in (default fp32; recorded only)\n"
    "  --out FILE           the model file to write (an existing file only with --overwrite)\n"
    "  --overwrite          replace an existing --out file\n";

std::string usage() { return kUsageToData + engine::join(data::dataset_names()) + kUsageFromData; }

}  // namespace

int run_import(Args& args) {
  if (args.take_flag("--help") || args.take_flag("-h")) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  TrainConfig trained;  // only the fields model_metadata writes
  trained.model = take_model_options(args);
  const std::string weights = args.take_string("--weights");
  const std::string layout_text = args.take_string("--layout", "dml");
  trained.data_name = args.take_string("--data");
  trained.data_root = args.take_string("--root", "");
  trained.data_transform = args.take_string("--transform", "robrank");
  trained.metric = take_metric_option(args).value_or(losses::Metric::N);
  const std::string precision_text = args.take_string("--trained-precision", "fp32");
  const std::string out = args.take_string("--out");
  const ExistingResult existing = take_existing_result_flags(args, /*can_resume=*/false);
  args.finish();

  check_model_options(trained.model);
  models::WeightLayout layout;
  try {
    layout = models::parse_weight_layout(layout_text);
  } catch (const engine::Error& e) {
    throw UsageError(std::string("--layout: ") + e.what());
  }
  try {
    (void)data::parse_transform_recipe(trained.data_transform);
  } catch (const engine::Error& e) {
    throw UsageError(std::string("--transform: ") + e.what());
  }
  try {
    trained.precision = engine::parse_precision(precision_text, "--trained-precision");
  } catch (const engine::Error& e) {
    throw UsageError(e.what());
  }
  if (!data::is_dataset_name(trained.data_name)) {
    throw UsageError("--data: unknown data set '" + trained.data_name +
                     "' (known: " + engine::join(data::dataset_names()) + ")");
  }
  require_input_file(weights, "--weights");
  refuse_output_over_input(out, "--out", weights, "--weights");
  check_result_file(out, "--out", existing);

  models::ModelConfig config = trained.model;
  config.init_weights = false;  // every weight is loaded next
  std::shared_ptr<models::Model> model = models::build_model(config);
  const auto tensors = models::rename_weights(models::read_weight_file(weights), layout,
                                              trained.model.name, weights);
  models::load_weights(*model, tensors, weights);
  models::save_weights(*model, out,
                       {{"format", "pt"}, {"dml_model", model_metadata(trained).dump()}});
  std::printf("wrote %s: %s, D = %lld, %lld BN branch(es), from %s (%s names), for %s, metric %s\n",
              out.c_str(), trained.model.name.c_str(),
              static_cast<long long>(trained.model.embedding_dim),
              static_cast<long long>(trained.model.bn_branches), weights.c_str(),
              layout_text.c_str(), trained.data_name.c_str(), losses::metric_name(trained.metric));
  return 0;
}

}  // namespace dml
