// The data set registry (data/dataset.h): names, aliases, default roots.
#include "data/dataset.h"

#include <algorithm>

#include "data/image_list.h"
#include "data/mnist.h"
#include "data/synthetic.h"
#include "engine/text.h"
#include "kernels/common/check.h"

namespace data {

using engine::fail;

namespace {

// robrank's short names are accepted too ("fashion", "cub", "cars").
std::string canonical_name(const std::string& name) {
  if (name == "fashion-mnist" || name == "fashion" || name == "fashionmnist")
    return "fashion-mnist";
  if (name == "mnist") return "mnist";
  if (name == "cub200" || name == "cub" || name == "cub-200-2011") return "cub200";
  if (name == "cars196" || name == "cars") return "cars196";
  if (name == "sop") return "sop";
  if (name == "synthetic") return "synthetic";
  fail("unknown data set '", name, "' (known: ", engine::join(dataset_names()), ")");
}

void check_split(const std::string& name, const std::string& split) {
  if (split != "train" && split != "test") {
    fail(name, ": unknown split '", split, "' (expected train or test)");
  }
}

std::string mnist_root(const std::string& name, const std::string& root) {
  if (!root.empty()) return root;
  if (name == "fashion-mnist") return kFashionMnistDefaultRoot;
  fail("mnist: a root directory is required (the folder holding train-images-idx3-ubyte.gz)");
}

}  // namespace

std::vector<int64_t> Dataset::labels() const {
  std::vector<int64_t> out(static_cast<std::size_t>(size()));
  for (int64_t i = 0; i < size(); ++i) out[static_cast<std::size_t>(i)] = label(i);
  return out;
}

std::vector<std::string> dataset_names() {
  return {"fashion-mnist", "mnist", "cub200", "cars196", "sop", "synthetic"};
}

bool is_dataset_name(const std::string& name) {
  const std::vector<std::string> names = dataset_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::unique_ptr<Dataset> open_dataset(const std::string& name, const std::string& split,
                                      const std::string& root, bool augment,
                                      const std::string& transform) {
  const TransformRecipe recipe = parse_transform_recipe(transform);
  const std::string canonical = canonical_name(name);
  check_split(canonical, split);
  if (canonical == "fashion-mnist" || canonical == "mnist") {
    return MnistDataset::open(canonical, split, mnist_root(canonical, root));
  }
  if (canonical == "synthetic") {
    return std::make_unique<SyntheticDataset>(parse_synthetic_spec(root), split);
  }
  return open_image_list_dataset(canonical, split, root, augment, recipe);
}

std::vector<SplitSummary> describe_dataset(const std::string& name, const std::string& root) {
  const std::string canonical = canonical_name(name);
  if (canonical == "fashion-mnist" || canonical == "mnist") {
    return describe_mnist(canonical, mnist_root(canonical, root));
  }
  if (canonical == "synthetic") return describe_synthetic(root);
  std::vector<SplitSummary> out;
  for (const std::string split : {"train", "test"}) {
    ImageList list;
    if (canonical == "cub200") list = read_cub_list(root, split);
    if (canonical == "cars196") list = read_cars_list(root, split);
    if (canonical == "sop") list = read_sop_list(root, split);
    out.push_back(summarize_list(list, split));
  }
  return out;
}

}  // namespace data
