// dml embed: a model's embeddings (eval mode, before any L2 normalization) of an image array or
// a dataset split, written as f32 .npy [N, D].
//
//   dml embed --model NAME --embedding-dim D --weights FILE (.safetensors or torch.save .pth)
//             (--input images.npy | --data NAME [--split test] [--root DIR] [--transform R])
//             --out emb.npy [--device cpu|cuda] [--batch-size B] [--bn-branches K]

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/transforms.h"
#include "engine/device.h"
#include "engine/io/npy.h"
#include "engine/text.h"
#include "models/embed.h"
#include "models/registry.h"
#include "models/weights.h"
#include "tools/dml/commands.h"
#include "tools/dml/load_model.h"
#include "tools/dml/output_files.h"
#include "tools/dml/split_stream.h"

namespace dml {

namespace {

// The usage around the list of datasets, which is data::dataset_names() (usage()).
const char* kUsageToData =
    "usage: dml embed --model NAME --embedding-dim D --weights FILE\n"
    "                 (--input images.npy | --data NAME [--split test] [--root DIR]\n"
    "                  [--transform robrank|revisiting])\n"
    "                 --out emb.npy [--labels-out labels.npy] [--device cpu|cuda]\n"
    "                 [--batch-size B] [--bn-branches K] [--layout dml|robrank]\n"
    "\n"
    "Writes the model's output (eval mode, before any L2 normalization) as float32 .npy [N, D].\n"
    "\n"
    "  --model NAME         c2f2, c2f2-bn, resnet18, resnet34, resnet50, resnet101, resnet152\n"
    "  --embedding-dim D    the model's embedding dimension (must match the weights)\n"
    "  --weights FILE       safetensors, or a torch.save .pth/.pt/.ckpt state dict, with the\n"
    "                       model's state (torchvision names for ResNets)\n"
    "  --layout L           the file's names: dml (default) or robrank (its Lightning\n"
    "                       checkpoints: backbone.*; dml import has the details)\n"
    "  --input FILE         float32 (or float64) .npy [N, C, H, W] with pixels in [0, 1]\n"
    "  --data NAME          a dataset instead: ";
const char* kUsageFromData =
    "\n"
    "  --split SPLIT        train or test (default test)\n"
    "  --root DIR           the dataset's directory (synthetic: its shape, docs/config.md)\n"
    "  --transform R        CUB/CARS/SOP image recipe: robrank (resize 256x256, center crop 224;\n"
    "                       default) or revisiting (shorter side 256, center crop 224)\n"
    "  --out FILE           output .npy (written atomically; an existing file is refused)\n"
    "  --labels-out FILE    also write the split's class labels as int64 .npy [N], the --labels\n"
    "                       of `dml metrics` (with --data)\n"
    "  --overwrite          replace an existing --out (and --labels-out) file\n"
    "  --device DEV         cpu, cuda or cuda:N (default: cuda when a GPU is present)\n"
    "  --batch-size B       images per forward pass (default 256)\n"
    "  --bn-branches K      batch-norm branches of the weights (default 1); branch 0 embeds\n"
    "  --bn-branch k        embed through BN branch k instead (0 <= k < K)\n";

std::string usage() { return kUsageToData + engine::join(data::dataset_names()) + kUsageFromData; }

engine::Tensor embed_dataset(models::Model& model, const data::Dataset& dataset,
                             int64_t batch_size) {
  const int64_t n = dataset.size();
  ENGINE_CHECK(n > 0, "dataset ", dataset.name(), " split ", dataset.split(), " is empty");
  ImageProgress progress("embed", n);
  return embed_split(model, dataset, n, batch_size,
                     [&progress](int64_t done, int64_t) { progress.update(done); });
}

engine::Tensor embed_file(models::Model& model, const std::string& path, int64_t batch_size) {
  engine::Tensor images = engine::load_npy(path);
  ENGINE_CHECK(engine::is_floating(images.dtype()), path, ": holds integers (", images.str(),
               "); dml embed wants float32 pixels in [0, 1] (divide 0..255 bytes by 255)");
  ENGINE_CHECK(images.dim() == 4 && images.size(0) > 0, path,
               ": expected a non-empty image array [N, C, H, W], got ", images.str());
  models::check_pixels(images, path);
  try {
    model.check_input(images);
  } catch (const engine::Error& e) {
    engine::fail(path, ": ", e.what());
  }
  ImageProgress progress("embed", images.size(0));
  models::EmbedOptions options;
  options.batch_size = batch_size;
  options.progress = [&progress](int64_t done, int64_t) { progress.update(done); };
  return models::embed(model, images, options);
}

// The --model network with the --weights file loaded (renamed from its layout), on `device`,
// embedding through BN branch `bn_branch`.
std::shared_ptr<models::Model> model_with_weights(const models::ModelConfig& config,
                                                  const std::string& weights,
                                                  models::WeightLayout layout,
                                                  const engine::Device& device, int64_t bn_branch) {
  std::shared_ptr<models::Model> model = models::build_model(config);
  models::load_weights(
      *model,
      models::rename_weights(models::read_weight_file(weights), layout, config.name, weights),
      weights);
  model->to(device);
  select_bn_branch(*model, config.bn_branches, bn_branch);
  return model;
}

}  // namespace

int run_embed(Args& args) {
  if (args.take_flag("--help") || args.take_flag("-h")) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  models::ModelConfig config = take_model_options(args);
  const std::string weights = args.take_string("--weights");
  const std::string layout_text = args.take_string("--layout", "dml");
  std::optional<std::string> input = args.take_optional("--input");
  std::optional<std::string> dataset = args.take_optional("--data");
  const std::optional<std::string> split_given = args.take_optional("--split");
  const std::string split = split_given.value_or("test");
  const std::optional<std::string> root = args.take_optional("--root");
  const std::optional<std::string> transform = args.take_optional("--transform");
  const std::string out = args.take_string("--out");
  const std::string labels_out = args.take_string("--labels-out", "");
  const std::optional<std::string> device_text = args.take_optional("--device");
  const int64_t batch_size = args.take_int("--batch-size", 256);
  const int64_t bn_branch = args.take_int("--bn-branch", 0);
  const ExistingResult existing = take_existing_result_flags(args, /*can_resume=*/false);
  args.finish();
  require_input_file(weights, "--weights");
  refuse_output_over_input(out, "--out", weights, "--weights");
  check_result_file(out, "--out", existing);
  check_result_file(labels_out, "--labels-out", existing);
  if (!labels_out.empty() && labels_out == out) {
    throw UsageError("--labels-out and --out name the same file");
  }

  check_model_options(config);
  models::WeightLayout layout;
  try {
    layout = models::parse_weight_layout(layout_text);
  } catch (const engine::Error& e) {
    throw UsageError(std::string("--layout: ") + e.what());
  }
  if (batch_size <= 0) throw UsageError("--batch-size must be positive");
  if (input.has_value() == dataset.has_value()) {
    throw UsageError("give exactly one of --input images.npy and --data NAME");
  }
  if (input && (root || split_given || transform || !labels_out.empty())) {
    throw UsageError("--split, --root, --transform and --labels-out go with --data, not --input");
  }
  if (transform) {
    try {
      (void)data::parse_transform_recipe(*transform);
    } catch (const engine::Error& e) {
      throw UsageError(std::string("--transform: ") + e.what());
    }
  }
  if (split != "train" && split != "test") {
    throw UsageError("--split must be train or test, got '" + split + "'");
  }
  const engine::Device device = parse_device_option(device_text);

  const std::shared_ptr<models::Model> model =
      model_with_weights(config, weights, layout, device, bn_branch);

  engine::Tensor embeddings;
  if (input) {
    embeddings = embed_file(*model, *input, batch_size);
  } else {
    const std::unique_ptr<data::Dataset> data =
        open_data_option(*dataset, split, root.value_or(""), transform.value_or("robrank"));
    embeddings = embed_dataset(*model, *data, batch_size);
    if (!labels_out.empty()) {
      const std::vector<int64_t> labels = data->labels();
      engine::save_npy(labels_out,
                       engine::Tensor::from_indices(labels, {static_cast<int64_t>(labels.size())}));
      std::printf("wrote %s: %zu int64 labels\n", labels_out.c_str(), labels.size());
    }
  }
  engine::save_npy(out, embeddings);
  std::printf("wrote %s: %lld x %lld float32 embeddings (%s on %s)\n", out.c_str(),
              static_cast<long long>(embeddings.size(0)),
              static_cast<long long>(embeddings.size(1)), config.name.c_str(),
              device.str().c_str());
  return 0;
}

}  // namespace dml
