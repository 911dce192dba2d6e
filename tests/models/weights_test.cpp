// Weights as safetensors: torchvision's ResNet-18/50 key lists (written out here from
// torchvision's architecture tables, not from our model) load; our files hold exactly those keys
// (plus aux_bn.* for K > 1); MDProp's aux_bn1/aux_bn2 names; every mismatch in one error.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/io/safetensors.h"
#include "engine/nn/nn.h"
#include "engine/random.h"
#include "models/registry.h"
#include "models/weights.h"
#include "tests/io/io_test_util.h"
#include "tests/models/helpers.h"
#include "tests/support/allclose.h"

using engine::DType;
using engine::Shape;
using engine::Tensor;

namespace {

struct Key {
  std::string name;
  Shape shape;
  bool counter = false;  // num_batches_tracked: I64 scalar
};

void add_bn(std::vector<Key>& keys, const std::string& prefix, int64_t channels) {
  for (const char* field : {"weight", "bias", "running_mean", "running_var"}) {
    keys.push_back({prefix + field, {channels}});
  }
  keys.push_back({prefix + "num_batches_tracked", {}, true});
}

// torchvision.models.resnet{18,50}(num_classes).state_dict(), from the architecture tables:
// stem conv1 [64, 3, 7, 7] + bn1; stages of width 64, 128, 256, 512 with BasicBlock x [2, 2, 2, 2]
// (two 3x3 convs, expansion 1) or Bottleneck x [3, 4, 6, 3] (1x1 w, 3x3 w, 1x1 4w); the first
// block of a stage gets downsample.0 (1x1 conv) + downsample.1 (BN) when stride 2 or the input
// width differs from the output width; fc [num_classes, 512 e] + bias.
std::vector<Key> torchvision_resnet_keys(bool bottleneck, int64_t num_classes) {
  const std::vector<int64_t> blocks =
      bottleneck ? std::vector<int64_t>{3, 4, 6, 3} : std::vector<int64_t>{2, 2, 2, 2};
  const int64_t e = bottleneck ? 4 : 1;
  std::vector<Key> keys;
  keys.push_back({"conv1.weight", {64, 3, 7, 7}});
  add_bn(keys, "bn1.", 64);
  int64_t in = 64;
  const int64_t widths[4] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t w = widths[stage];
    for (int64_t b = 0; b < blocks[stage]; ++b) {
      const std::string p = "layer" + std::to_string(stage + 1) + "." + std::to_string(b) + ".";
      if (bottleneck) {
        keys.push_back({p + "conv1.weight", {w, in, 1, 1}});
        add_bn(keys, p + "bn1.", w);
        keys.push_back({p + "conv2.weight", {w, w, 3, 3}});
        add_bn(keys, p + "bn2.", w);
        keys.push_back({p + "conv3.weight", {4 * w, w, 1, 1}});
        add_bn(keys, p + "bn3.", 4 * w);
      } else {
        keys.push_back({p + "conv1.weight", {w, in, 3, 3}});
        add_bn(keys, p + "bn1.", w);
        keys.push_back({p + "conv2.weight", {w, w, 3, 3}});
        add_bn(keys, p + "bn2.", w);
      }
      const bool stride2 = stage > 0 && b == 0;
      if (stride2 || in != w * e) {
        keys.push_back({p + "downsample.0.weight", {w * e, in, 1, 1}});
        add_bn(keys, p + "downsample.1.", w * e);
      }
      in = w * e;
    }
  }
  keys.push_back({"fc.weight", {num_classes, 512 * e}});
  keys.push_back({"fc.bias", {num_classes}});
  return keys;
}

// Trainable parameter count implied by a key list (BN running stats and counters excluded).
int64_t parameter_count(const std::vector<Key>& keys) {
  int64_t n = 0;
  for (const Key& key : keys) {
    bool stat = key.counter || key.name.find("running_") != std::string::npos;
    if (!stat) n += engine::shape_numel(key.shape);
  }
  return n;
}

// Tensor i is filled with 0.001 * (i + 1) (running_var gets 1 + that, to stay a variance), so a
// loaded model can be checked key by key cheaply.
double fill_value(size_t i, const std::string& name) {
  double v = 0.001 * double(i + 1);
  return name.find("running_var") != std::string::npos ? 1.0 + v : v;
}

std::map<std::string, Tensor> tensors_for(const std::vector<Key>& keys, bool with_counters) {
  std::map<std::string, Tensor> tensors;
  for (size_t i = 0; i < keys.size(); ++i) {
    const Key& key = keys[i];
    if (key.counter) {
      if (with_counters) tensors[key.name] = Tensor::full({}, 7, DType::I64);
    } else {
      tensors[key.name] = Tensor::full(key.shape, fill_value(i, key.name));
    }
  }
  return tensors;
}

// A scratch directory on tmpfs when there is one: the writer fsyncs (atomic files), which costs
// seconds per 100 MB on a busy disk and nothing on tmpfs.
class ScratchDir {
 public:
  ScratchDir() {
    static int counter = 0;
    std::filesystem::path base = std::filesystem::is_directory("/dev/shm")
                                     ? std::filesystem::path("/dev/shm")
                                     : std::filesystem::temp_directory_path();
    path_ = base /
            ("models_weights_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::shared_ptr<models::Model> build(const std::string& name, int64_t dim, int64_t k = 1) {
  // init = false: every value is overwritten by the load.
  return models_test::build_model(0, name, dim, k, /*frozen=*/false, /*init=*/false);
}

// Loads the torchvision-named file into the model, checks every value, saves the model and
// checks the saved file holds exactly the torchvision keys with their shapes and dtypes.
void check_torchvision_round_trip(const std::string& model_name, bool bottleneck,
                                  bool with_counters) {
  std::vector<Key> keys = torchvision_resnet_keys(bottleneck, 1000);
  ScratchDir dir;
  const std::string in_path = dir.file("torchvision.safetensors");
  engine::SafetensorsFile file;
  for (const auto& entry : tensors_for(keys, with_counters)) {
    file.tensors.emplace_back(entry.first, engine::raw_from_tensor(entry.second));
  }
  test::write_bytes(in_path, engine::serialize_safetensors(file));

  auto model = build(model_name, 1000);
  REQUIRE(model->parameter_count() == parameter_count(keys));
  models::load_weights(*model, in_path);
  engine::nn::StateDict state = model->state_dict();
  REQUIRE(state.size() == keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    INFO(keys[i].name);
    const Tensor& t = state.at(keys[i].name);
    REQUIRE(t.shape() == keys[i].shape);
    // Counters: 7 from the file, or 0 (the model's own) when the file had none.
    double expected = keys[i].counter ? (with_counters ? 7 : 0) : fill_value(i, keys[i].name);
    Tensor flat = t.flatten();
    const int64_t n = flat.numel();
    REQUIRE(flat.slice(0, 0, 1).item() == Approx(expected).epsilon(1e-6));
    REQUIRE(flat.slice(0, n - 1, n).item() == Approx(expected).epsilon(1e-6));
  }

  const std::string out_path = dir.file("ours.safetensors");
  models::save_weights(*model, out_path);
  engine::SafetensorsFile saved = engine::read_safetensors(out_path);
  REQUIRE(saved.tensors.size() == keys.size());
  for (const Key& key : keys) {
    INFO(key.name);
    const engine::RawTensor* raw = saved.find(key.name);
    REQUIRE(raw != nullptr);
    CHECK(raw->shape == key.shape);
    CHECK(raw->dtype ==
          (key.counter ? engine::SafetensorsDType::I64 : engine::SafetensorsDType::F32));
  }
  CHECK(saved.metadata.at("format") == "pt");
}

}  // namespace

TEST_CASE("weights: torchvision key lists have torchvision's sizes", "[models][weights]") {
  // Cross-checks of the hand-written tables: torchvision's parameter counts, and
  // len(resnet18().state_dict()) = 122, len(resnet50().state_dict()) = 320.
  CHECK(parameter_count(torchvision_resnet_keys(false, 1000)) == 11689512);
  CHECK(parameter_count(torchvision_resnet_keys(true, 1000)) == 25557032);
  CHECK(torchvision_resnet_keys(false, 1000).size() == 122);
  CHECK(torchvision_resnet_keys(true, 1000).size() == 320);
}

TEST_CASE("weights: a torchvision resnet18 file loads and ours has exactly its keys",
          "[models][weights]") {
  check_torchvision_round_trip("resnet18", false, true);
}

TEST_CASE("weights: a torchvision resnet50 file loads and ours has exactly its keys",
          "[models][weights]") {
  check_torchvision_round_trip("resnet50", true, true);
}

TEST_CASE("weights: a file without num_batches_tracked (legacy torchvision) loads",
          "[models][weights]") {
  check_torchvision_round_trip("resnet18", false, false);
}

TEST_CASE("weights: K = 2 saves torchvision's keys plus aux_bn.0 of every BN",
          "[models][weights]") {
  auto model = build("resnet18", 1000, 2);
  ScratchDir dir;
  const std::string path = dir.file("k2.safetensors");
  models::save_weights(*model, path);
  engine::SafetensorsFile saved = engine::read_safetensors(path);
  std::set<std::string> names;
  for (const auto& entry : saved.tensors) names.insert(entry.first);
  std::set<std::string> expected;
  for (const Key& key : torchvision_resnet_keys(false, 1000)) {
    expected.insert(key.name);
    // "<bn>.<field>" -> "<bn>.aux_bn.0.<field>" for the five BN fields.
    for (const char* field :
         {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}) {
      const std::string suffix = std::string(".") + field;
      bool is_bn = key.name.find("bn") != std::string::npos ||
                   key.name.find("downsample.1.") != std::string::npos;
      if (is_bn && key.name.size() > suffix.size() &&
          key.name.compare(key.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        expected.insert(key.name.substr(0, key.name.size() - suffix.size()) + ".aux_bn.0" + suffix);
      }
    }
  }
  // 20 BNs x 5 fields = 100 aux keys on top of the 122.
  CHECK(expected.size() == 222);
  CHECK(names == expected);
  // Our own file loads back into a K = 2 model.
  REQUIRE_NOTHROW(models::load_weights(*build("resnet18", 1000, 2), path));
}

TEST_CASE("weights: MDProp aux_bn1 / aux_bn2 names load into branches 1 and 2",
          "[models][weights]") {
  CHECK(models::canonical_weight_name("layer1.0.bn1.aux_bn1.weight") ==
        "layer1.0.bn1.aux_bn.0.weight");
  CHECK(models::canonical_weight_name("bn1.aux_bn2.running_var") == "bn1.aux_bn.1.running_var");
  CHECK(models::canonical_weight_name("bn1.aux_bn.1.bias") == "bn1.aux_bn.1.bias");
  CHECK(models::canonical_weight_name("aux_bn0.weight") == "aux_bn0.weight");  // not MDProp's
  CHECK(models::canonical_weight_name("fc.weight") == "fc.weight");

  auto model = build("c2f2-bn", 8, 3);
  std::map<std::string, Tensor> tensors;
  for (const auto& entry : model->state_dict()) {
    std::string name = entry.first;
    // Rename aux_bn.0 -> aux_bn1 and aux_bn.1 -> aux_bn2, as MDProp's MixBatchNorm2d writes.
    for (int k = 0; k < 2; ++k) {
      const std::string ours = ".aux_bn." + std::to_string(k) + ".";
      size_t at = name.find(ours);
      if (at != std::string::npos)
        name.replace(at, ours.size(), ".aux_bn" + std::to_string(k + 1) + ".");
    }
    tensors[name] = entry.second.clone();
  }
  REQUIRE(tensors.count("bn2.aux_bn2.running_mean") == 1);
  tensors["bn2.aux_bn1.running_mean"] = Tensor::full({64}, 0.25);
  tensors["bn2.aux_bn2.running_mean"] = Tensor::full({64}, 0.5);
  models::load_weights(*model, tensors, "mdprop.safetensors");
  // Row k of the [K, C] running mean is branch k.
  std::vector<double> mean = model->state_dict().at("bn2.aux_bn.0.running_mean").to_vector();
  CHECK(mean == std::vector<double>(64, 0.25));
  CHECK(model->state_dict().at("bn2.aux_bn.1.running_mean").to_vector() ==
        std::vector<double>(64, 0.5));
  CHECK(model->state_dict().at("bn2.running_mean").to_vector() == std::vector<double>(64, 0.0));

  // Both spellings of one branch: refused, naming both.
  tensors["bn2.aux_bn.0.running_mean"] = Tensor::full({64}, 0.75);
  REQUIRE_THROWS_WITH(models::load_weights(*model, tensors, "mdprop.safetensors"),
                      Catch::Contains("'bn2.aux_bn.0.running_mean'") &&
                          Catch::Contains("'bn2.aux_bn1.running_mean'"));
}

TEST_CASE("weights: missing, unexpected, mis-shaped, integer and NaN keys in one error",
          "[models][weights]") {
  auto model = build("c2f2", 16);
  std::map<std::string, Tensor> tensors;
  for (const auto& entry : model->state_dict()) tensors[entry.first] = entry.second.clone();
  tensors.erase("conv1.bias");                            // missing
  tensors["conv3.weight"] = Tensor::zeros({2, 2});        // unexpected
  tensors["fc2.weight"] = Tensor::zeros({10, 1024});      // mis-shaped (model [16, 1024])
  tensors["fc2.bias"] = Tensor::zeros({16}, DType::I64);  // integer data
  tensors["fc1.bias"] = Tensor::full({1024}, NAN);        // non-finite
  Tensor before = model->state_dict().at("conv2.weight").clone();
  try {
    models::load_weights(*model, tensors, "/tmp/bad.safetensors");
    FAIL("no error");
  } catch (const engine::Error& e) {
    std::string message = e.what();
    INFO(message);
    CHECK(message.find("/tmp/bad.safetensors") != std::string::npos);
    CHECK(message.find("c2f2 (embedding_dim 16") != std::string::npos);
    CHECK(message.find("missing keys (1): 'conv1.bias'") != std::string::npos);
    CHECK(message.find("unexpected keys (1): 'conv3.weight'") != std::string::npos);
    CHECK(message.find("'fc2.weight' (model [16, 1024], file [10, 1024])") != std::string::npos);
    CHECK(message.find("'fc2.bias' (integer data") != std::string::npos);
    CHECK(message.find("'fc1.bias' (element 0)") != std::string::npos);
  }
  // Nothing was copied.
  test::require_close(model->state_dict().at("conv2.weight"), before, 0, 0, "conv2.weight");
}

TEST_CASE("weights: a K = 1 file fills aux branches from branch 0 when asked",
          "[models][weights]") {
  auto single = build("c2f2-bn", 8, 1);
  engine::nn::StateDict state = single->state_dict();
  Tensor(state.at("bn3.running_var")).fill_(2.5);
  Tensor(state.at("bn1.weight")).fill_(0.5);
  std::map<std::string, Tensor> tensors;
  for (const auto& entry : state) tensors[entry.first] = entry.second;

  auto triple = build("c2f2-bn", 8, 3);
  REQUIRE_THROWS_WITH(
      models::load_weights(*triple, tensors, "k1"),
      Catch::Contains("'bn1.aux_bn.0.weight'") && Catch::Contains("'bn3.aux_bn.1.running_var'"));
  models::WeightLoadOptions options;
  options.aux_from_main = true;
  models::load_weights(*triple, tensors, "k1", options);
  engine::nn::StateDict loaded = triple->state_dict();
  for (const char* key :
       {"bn3.running_var", "bn3.aux_bn.0.running_var", "bn3.aux_bn.1.running_var"}) {
    INFO(key);
    CHECK(loaded.at(key).to_vector() == std::vector<double>(1024, 2.5));
  }
  CHECK(loaded.at("bn1.aux_bn.1.weight").to_vector() == std::vector<double>(32, 0.5));
  // A mis-shaped branch-0 entry is copied into the aux branches too: every copy is named by its
  // model name (they are in no file), none as ''.
  tensors["bn1.weight"] = Tensor::ones({31});
  REQUIRE_THROWS_WITH(models::load_weights(*triple, tensors, "k1", options),
                      Catch::Contains("'bn1.weight' (model [32], file [31])") &&
                          Catch::Contains("'bn1.aux_bn.1.weight' (model [32], file [31])") &&
                          !Catch::Contains("''"));
}

TEST_CASE("weights: an ImageNet resnet18 file (1000-way fc) loads into a D = 512 model, fc kept",
          "[models][weights]") {
  // robrank's start: torchvision's ImageNet ResNet-18 with fc replaced by a fresh 512 -> D layer.
  // The file's fc is [1000, 512]; keep_prefixes {"fc."} leaves the model's own fc in place.
  std::vector<Key> keys = torchvision_resnet_keys(false, 1000);
  ScratchDir dir;
  const std::string path = dir.file("imagenet.safetensors");
  engine::SafetensorsFile file;
  for (const auto& entry : tensors_for(keys, true)) {
    file.tensors.emplace_back(entry.first, engine::raw_from_tensor(entry.second));
  }
  test::write_bytes(path, engine::serialize_safetensors(file));

  auto model = build("resnet18", 512, 2);  // K = 2: aux branches from the file's main ones
  const Tensor fc_before = model->state_dict().at("fc.weight").clone();
  models::WeightLoadOptions options;
  options.aux_from_main = true;
  REQUIRE_THROWS_WITH(models::load_weights(*model, path, options),
                      Catch::Contains("'fc.weight' (model [512, 512], file [1000, 512])"));
  options.keep_prefixes = {"fc."};
  models::load_weights(*model, path, options);
  const engine::nn::StateDict loaded = model->state_dict();
  test::require_close(loaded.at("fc.weight"), fc_before, 0, 0, "fc.weight");
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].name.rfind("fc.", 0) == 0 || keys[i].counter) continue;
    INFO(keys[i].name);
    // tensors_for fills key i with fill_value(i, name) everywhere.
    const double expected = fill_value(i, keys[i].name);
    CHECK(loaded.at(keys[i].name).flatten().slice(0, 0, 1).item() ==
          Approx(expected).epsilon(1e-6));
  }
  // The aux branch of bn1 took branch 0's values from the file.
  CHECK(loaded.at("bn1.aux_bn.0.weight").to_vector() == loaded.at("bn1.weight").to_vector());
}

TEST_CASE("weights: a corrupt file is an error naming it", "[models][weights]") {
  test::TempDir dir;
  const std::string path = dir.file("broken.safetensors");
  test::write_bytes(path, {1, 2, 3});
  auto model = build("c2f2", 4);
  REQUIRE_THROWS_WITH(models::load_weights(*model, path), Catch::Contains("broken.safetensors"));
  REQUIRE_THROWS_WITH(models::load_weights(*model, dir.file("absent.safetensors")),
                      Catch::Contains("absent.safetensors"));
}

TEST_CASE("weights: robrank's layout: C2F2's Sequential indices and the backbone. prefix",
          "[models][weights]") {
  // robrank models/template_rank.py (MetricTemplate28): backbone = Sequential(conv 1->32 k5,
  // ReLU, pool, conv 32->64 k5, ReLU, pool, flatten, linear 3136->1024, ReLU, linear 1024->D),
  // so its weights are backbone.0, .3, .7 and .9 (written out here, not taken from our model).
  const int64_t d = 8;
  const std::vector<std::pair<std::string, Shape>> robrank = {
      {"backbone.0.weight", {32, 1, 5, 5}},  {"backbone.0.bias", {32}},
      {"backbone.3.weight", {64, 32, 5, 5}}, {"backbone.3.bias", {64}},
      {"backbone.7.weight", {1024, 3136}},   {"backbone.7.bias", {1024}},
      {"backbone.9.weight", {d, 1024}},      {"backbone.9.bias", {d}}};
  std::map<std::string, Tensor> file;
  for (size_t i = 0; i < robrank.size(); ++i) {
    file[robrank[i].first] = Tensor::full(robrank[i].second, 0.25 * static_cast<double>(i + 1));
  }
  file["lossfunc.scale"] = Tensor::full({1}, 9.0);  // a loss's own entry: not the network's
  auto model = build("c2f2", d);
  models::load_weights(
      *model, models::rename_weights(file, models::WeightLayout::Robrank, "c2f2", "f"), "f");
  const engine::nn::StateDict state = model->state_dict();
  const std::vector<std::string> ours = {"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                         "fc1.weight",   "fc1.bias",   "fc2.weight",   "fc2.bias"};
  REQUIRE(state.size() == ours.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    INFO(ours[i]);
    const Tensor flat = state.at(ours[i]).flatten();
    CHECK(flat.slice(0, 0, 1).item() == 0.25 * static_cast<double>(i + 1));
    CHECK(flat.slice(0, flat.numel() - 1, flat.numel()).item() ==
          0.25 * static_cast<double>(i + 1));
  }
  // Our own names pass unchanged.
  CHECK(models::rename_weights(file, models::WeightLayout::Ours, "c2f2", "f").size() == 9);

  file["backbone.5.weight"] = Tensor::full({1}, 1.0);  // index 5 is a max-pool: no weights
  REQUIRE_THROWS_WITH(models::rename_weights(file, models::WeightLayout::Robrank, "c2f2", "f.ckpt"),
                      Catch::Contains("f.ckpt") && Catch::Contains("backbone.5.weight"));
  REQUIRE_THROWS_WITH(
      models::rename_weights({{"conv1.weight", Tensor::full({1}, 1.0)}},
                             models::WeightLayout::Robrank, "c2f2", "mine.safetensors"),
      Catch::Contains("mine.safetensors") && Catch::Contains("no backbone.* entry"));
  CHECK(models::parse_weight_layout("dml") == models::WeightLayout::Ours);
  CHECK(models::parse_weight_layout("robrank") == models::WeightLayout::Robrank);
  REQUIRE_THROWS_WITH(models::parse_weight_layout("torch"), Catch::Contains("dml, robrank"));
}

TEST_CASE("weights: robrank's layout: a ResNet is torchvision's under backbone.",
          "[models][weights]") {
  // robrank's MetricTemplate224 keeps torchvision's resnet18 as `backbone` with fc replaced by a
  // D-way linear layer.
  const std::vector<Key> keys = torchvision_resnet_keys(false, 16);
  std::map<std::string, Tensor> file;
  for (const auto& [name, tensor] : tensors_for(keys, true)) file["backbone." + name] = tensor;
  file["lossfunc.scale"] = Tensor::full({1}, 9.0);
  auto model = build("resnet18", 16);
  models::load_weights(
      *model, models::rename_weights(file, models::WeightLayout::Robrank, "resnet18", "r.ckpt"),
      "r.ckpt");
  const engine::nn::StateDict state = model->state_dict();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].counter) continue;
    INFO(keys[i].name);
    CHECK(state.at(keys[i].name).flatten().slice(0, 0, 1).item() ==
          Approx(fill_value(i, keys[i].name)).epsilon(1e-6));
  }
}
