// dml info: a model's module tree and parameter count, or a dataset's splits.
//
//   dml info --model NAME [--embedding-dim D] [--bn-branches K] [--frozen-bn]
//   dml info --data NAME [--root DIR]
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "engine/text.h"
#include "models/registry.h"
#include "models/summary.h"
#include "tools/dml/commands.h"

namespace dml {

namespace {

// The usage around the list of datasets, which is data::dataset_names() (usage()).
const char* kUsageToData =
    "usage: dml info --model NAME [--embedding-dim D] [--bn-branches K] [--frozen-bn]\n"
    "       dml info --data NAME [--root DIR]\n"
    "\n"
    "  --model NAME         c2f2, c2f2-bn, resnet18, resnet34, resnet50, resnet101, resnet152:\n"
    "                       prints the module tree and the parameter count\n"
    "  --embedding-dim D    embedding dimension (default 512; 1000 gives torchvision's counts)\n"
    "  --bn-branches K      batch-norm branches (default 1; MDProp uses 3)\n"
    "  --frozen-bn          eval-mode batch norm while training (robrank's freeze_bn)\n"
    "  --data NAME          ";
const char* kUsageFromData =
    ":\n"
    "                       prints split sizes and class counts\n"
    "  --root DIR           the dataset's directory (fashion-mnist defaults to the Debian\n"
    "                       package's /usr/share/datasets/fashion-mnist); for synthetic (tests\n"
    "                       and benchmarks only) its shape, e.g. size=32,classes=10\n"
    "                       (docs/config.md)\n";

std::string usage() { return kUsageToData + engine::join(data::dataset_names()) + kUsageFromData; }

int info_model(const std::string& name, Args& args) {
  models::ModelConfig config;
  config.name = name;
  config.embedding_dim = args.take_int("--embedding-dim", 512);
  config.bn_branches = args.take_int("--bn-branches", 1);
  config.frozen_bn = args.take_flag("--frozen-bn");
  config.init_weights = false;  // counts and shapes only: skip the ResNets' kaiming re-init
  args.finish();
  if (!models::is_model_name(name)) {
    throw UsageError("unknown model '" + name + "' (known: " + engine::join(models::model_names()) +
                     ")");
  }
  if (config.embedding_dim <= 0) {
    throw UsageError("--embedding-dim must be positive, got " +
                     std::to_string(config.embedding_dim));
  }
  if (config.bn_branches <= 0) {
    throw UsageError("--bn-branches must be positive, got " + std::to_string(config.bn_branches));
  }
  if (name == "c2f2" && (config.bn_branches != 1 || config.frozen_bn)) {
    throw UsageError("c2f2 has no batch norm: --bn-branches and --frozen-bn need c2f2-bn");
  }
  std::shared_ptr<models::Model> model = models::build_model(config);
  std::string input = "[N";
  for (int64_t d : model->input_shape())
    input += ", " + (d == 0 ? std::string("*") : std::to_string(d));
  std::printf("model %s: embedding_dim %lld, bn_branches %lld%s, input %s] in [0, 1]\n\n",
              name.c_str(), static_cast<long long>(config.embedding_dim),
              static_cast<long long>(config.bn_branches), config.frozen_bn ? ", frozen BN" : "",
              input.c_str());
  std::fputs(models::module_tree(*model).c_str(), stdout);
  std::printf("state entries (safetensors keys): %zu\n", model->state_dict().size());
  return 0;
}

int info_data(const std::string& name, Args& args) {
  const std::string root = args.take_string("--root", "");
  args.finish();
  std::vector<data::SplitSummary> splits;
  try {
    splits = data::describe_dataset(name, root);
  } catch (const engine::Error& e) {
    // A dataset that cannot be opened (unknown name, missing or broken files) is exit code 2 in
    // every subcommand, as in dml train's config (docs/config.md, data.root).
    throw UsageError("--data " + name + ": " + e.what());
  }
  const std::string where = root.empty() ? std::string() : " in " + root;
  std::printf("dataset %s%s\n\n", name.c_str(), where.c_str());
  std::printf("%-8s %12s %10s   %s\n", "split", "images", "classes", "class ids");
  for (const data::SplitSummary& s : splits) {
    std::printf("%-8s %12s %10s   %lld..%lld\n", s.split.c_str(),
                models::with_thousands(s.size).c_str(),
                models::with_thousands(s.num_classes).c_str(),
                static_cast<long long>(s.first_class_id), static_cast<long long>(s.last_class_id));
  }
  return 0;
}

}  // namespace

int run_info(Args& args) {
  if (args.take_flag("--help") || args.take_flag("-h")) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  std::optional<std::string> model = args.take_optional("--model");
  std::optional<std::string> dataset = args.take_optional("--data");
  if (model && dataset) throw UsageError("give either --model or --data, not both");
  if (model) return info_model(*model, args);
  if (dataset) return info_data(*dataset, args);
  throw UsageError("missing --model NAME or --data NAME");
}

}  // namespace dml
