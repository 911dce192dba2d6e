// Tiny `dml train` runs (tools/dml/trainer.h) for every loss of loss_names(), on a generated
// 10-class data set in MNIST's IDX format (a bright square whose place depends on the class, on
// noise), with C2F2 D=8, SPC-2 batches of 4 pairs and a 20-image evaluation, so each run takes well
// under a second. They check that each loss trains: every logged loss is finite and the gradient
// reaches the first and last layers (their weights leave their initial values); that the losses'
// own parameters (margin's beta, ArcFace's centers) are trained by their own optimizer and survive
// --resume bit-identically; and that optimizer.groups reach the optimizer (a group with lr 0 leaves
// its parameters untouched).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/idx.h"
#include "engine/io/safetensors.h"
#include "engine/random.h"
#include "losses/arcface.h"
#include "models/registry.h"
#include "tests/io/io_test_util.h"
#include "tools/dml/config.h"
#include "tools/dml/trainer.h"

using nlohmann::json;

namespace {

constexpr int64_t kClasses = 10;
constexpr int64_t kEmbeddingDim = 8;
constexpr uint64_t kSeed = 5;

// n images of 28x28: image i has class i % 10, uniform noise in [0, 48) and a 7x7 square of 255 at
// row 3 + 12 (c / 5), column 1 + 5 (c % 5), shifted by up to one pixel at random.
void write_split(const std::string& dir, const std::string& prefix, int64_t n, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<uint8_t> pixels, labels;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = i % kClasses;
    std::vector<uint8_t> image(28 * 28);
    for (uint8_t& p : image) p = static_cast<uint8_t>(random() % 48);
    const int64_t top = 3 + 12 * (c / 5) + static_cast<int64_t>(random() % 3) - 1;
    const int64_t left = 1 + 5 * (c % 5) + static_cast<int64_t>(random() % 3) - 1;
    for (int64_t y = top; y < top + 7; ++y) {
      for (int64_t x = left; x < left + 7; ++x) {
        if (y >= 0 && y < 28 && x >= 0 && x < 28) image[static_cast<size_t>(y * 28 + x)] = 255;
      }
    }
    pixels.insert(pixels.end(), image.begin(), image.end());
    labels.push_back(static_cast<uint8_t>(c));
  }
  test::write_bytes(dir + "/" + prefix + "-images-idx3-ubyte",
                    data::idx_bytes(data::IdxHeader{0x08, {n, 28, 28}}, pixels));
  test::write_bytes(dir + "/" + prefix + "-labels-idx1-ubyte",
                    data::idx_bytes(data::IdxHeader{0x08, {n}}, labels));
}

// The generated data set, written once per test binary run.
const std::string& data_root() {
  static test::TempDir dir;
  static const bool written = [] {
    write_split(dir.file(""), "train", 100, 1);
    write_split(dir.file(""), "t10k", 30, 2);
    return true;
  }();
  (void)written;
  static const std::string root = dir.file("");
  return root;
}

// `steps` batches of 4 pairs in one epoch, evaluation at the end on 20 test images; `extra` is
// merged over it (json::merge_patch).
dml::TrainConfig tiny_config(const std::string& loss, const std::string& output_dir, int64_t steps,
                             const json& extra = json::object()) {
  json config = {{"data", {{"name", "mnist"}, {"root", data_root()}, {"num_workers", 0}}},
                 {"model", {{"name", "c2f2"}, {"embedding_dim", kEmbeddingDim}}},
                 {"sampler", {{"pairs_per_batch", 4}, {"max_batches_per_epoch", steps}}},
                 {"loss", {{"name", loss}}},
                 {"epochs", 1},
                 {"eval", {{"every_epochs", 0}, {"max_images", 20}, {"batch_size", 20}}},
                 {"log_every_batches", 1},
                 {"output_dir", output_dir},
                 {"seed", kSeed},
                 {"device", "cpu"}};
  config.merge_patch(extra);
  return dml::resolve_config(config, loss + " test config");
}

std::vector<json> log_records(const std::string& output_dir, const std::string& type) {
  std::ifstream in(output_dir + "/log.jsonl");
  std::vector<json> records;
  std::string line;
  while (std::getline(in, line)) {
    json record = json::parse(line);
    if (record.at("type") == type) records.push_back(record);
  }
  return records;
}

std::map<std::string, engine::RawTensor> checkpoint_tensors(const std::string& output_dir) {
  std::map<std::string, engine::RawTensor> tensors;
  for (auto& [name, raw] : engine::read_safetensors(dml::checkpoint_path(output_dir)).tensors) {
    tensors[name] = raw;
  }
  return tensors;
}

std::vector<uint8_t> bytes_of(const engine::Tensor& t) { return engine::raw_from_tensor(t).bytes; }

std::vector<float> floats_of(const engine::RawTensor& raw) {
  REQUIRE(raw.dtype == engine::SafetensorsDType::F32);
  std::vector<float> values(raw.bytes.size() / sizeof(float));
  std::memcpy(values.data(), raw.bytes.data(), raw.bytes.size());
  return values;
}

// The model's initial weights, built as trainer.h documents: Generator(seed), consumed by the model
// first (ArcFace's centers draw next from the same generator).
struct InitialState {
  std::map<std::string, engine::Tensor> model;
  engine::Tensor centers;
};
InitialState initial_state(const dml::TrainConfig& config) {
  engine::Generator gen(config.seed);
  InitialState init;
  for (const auto& [name, t] : models::build_model(config.model, gen)->state_dict()) {
    init.model[name] = t;
  }
  init.centers = losses::ArcFaceLoss(kClasses, kEmbeddingDim, gen, config.arcface).centers();
  return init;
}

void check_loss_trains(const std::string& loss) {
  test::TempDir out;
  const int64_t steps = 2;
  const dml::TrainConfig config = tiny_config(loss, out.file("run"), steps);
  REQUIRE(dml::train(config, dml::TrainOptions()) == 0);

  const std::vector<json> train = log_records(out.file("run"), "train");
  REQUIRE(train.size() == static_cast<size_t>(steps));
  for (const json& record : train) {
    INFO(record.dump());
    CHECK(std::isfinite(record.at("loss").get<double>()));
  }
  CHECK(log_records(out.file("run"), "eval").size() == 1);

  // The loss's gradient reached the first and the last layer: both left their initial values.
  const InitialState init = initial_state(config);
  const auto tensors = checkpoint_tensors(out.file("run"));
  for (const char* name : {"conv1.weight", "fc2.weight"}) {
    INFO(loss << ": " << name);
    CHECK(tensors.at(std::string("model.") + name).bytes != bytes_of(init.model.at(name)));
  }

  if (loss == "margin") {
    // beta starts at 0.6 and takes one plain SGD step of lr 5e-4 per batch. d loss / d beta is -1
    // (only positive hinges active), +1 (only negative ones) or 0 (both or neither: the two means'
    // derivatives cancel), so beta = 0.6 - k x 5e-4 with an integer k in [-2, 2], and k != 0 once
    // it has moved at all.
    const float beta = floats_of(tensors.at("loss.beta")).at(0);
    const double k = (0.6 - beta) / 5e-4;
    INFO("beta " << beta << ", k " << k);
    CHECK(std::abs(k - std::round(k)) < 1e-3);  // f32 rounding of beta is ~6e-8, i.e. 1e-4 in k
    CHECK(std::abs(std::round(k)) >= 1);
    CHECK(std::abs(std::round(k)) <= steps);
    CHECK(engine::tensor_from_raw(tensors.at("loss_optimizer.state.0.step")).item() == steps);
    CHECK(train.back().at("beta").get<double>() == Approx(beta));
  } else if (loss == "arcface") {
    // The centers are drawn after the model from Generator(seed) and moved by their own Adam (lr
    // 5e-4). An Adam step moves an element by lr |m^ / (sqrt(v^) + eps)|, at most about
    // lr (1 - beta1) / sqrt(1 - beta2) = 3.2 lr, so after 2 steps no element is more than
    // 10 lr away from its initial value — far less than the init's scale 1/sqrt(D) = 0.35, so a
    // different draw would show — and some element has moved.
    const std::vector<float> trained = floats_of(tensors.at("loss.centers"));
    const std::vector<double> initial = init.centers.to_vector();
    REQUIRE(trained.size() == static_cast<size_t>(kClasses * kEmbeddingDim));
    double largest = 0.0;
    for (size_t i = 0; i < trained.size(); ++i) {
      largest = std::max(largest, std::abs(trained[i] - initial[i]));
    }
    CHECK(largest > 0.0);
    CHECK(largest <= 10 * steps * 5e-4);
    CHECK(engine::tensor_from_raw(tensors.at("loss_optimizer.state.0.step")).item() == steps);
  } else {
    for (const auto& [name, raw] : tensors) {
      INFO(name);
      CHECK(name.rfind("loss", 0) != 0);  // no loss parameters, no loss optimizer
    }
  }
}

// A run stopped after `stop_after` steps and resumed ends bit-identical to an uninterrupted one:
// model weights, the loss's parameters, both optimizers' states and the metrics.
void check_resume_bit_identical(const std::string& loss, int64_t epochs, int64_t steps_per_epoch,
                                int64_t stop_after) {
  test::TempDir out;
  const json run = {{"epochs", epochs}};
  REQUIRE(dml::train(tiny_config(loss, out.file("whole"), steps_per_epoch, run),
                     dml::TrainOptions()) == 0);
  dml::TrainOptions stop;
  stop.stop_after_batches = stop_after;
  const dml::TrainConfig split = tiny_config(loss, out.file("split"), steps_per_epoch, run);
  REQUIRE(dml::train(split, stop) == 0);
  CHECK_FALSE(std::filesystem::exists(out.file("split/model.safetensors")));
  dml::TrainOptions resume;
  resume.resume = true;
  REQUIRE(dml::train(split, resume) == 0);

  CHECK(test::read_bytes(out.file("whole/model.safetensors")) ==
        test::read_bytes(out.file("split/model.safetensors")));
  CHECK(test::read_bytes(out.file("whole/metrics.json")) ==
        test::read_bytes(out.file("split/metrics.json")));
  const auto whole = checkpoint_tensors(out.file("whole"));
  const auto resumed = checkpoint_tensors(out.file("split"));
  REQUIRE(whole.size() == resumed.size());
  int64_t loss_entries = 0;
  for (const auto& [name, raw] : whole) {
    INFO(name);
    REQUIRE(resumed.count(name) == 1);
    CHECK(resumed.at(name).bytes == raw.bytes);
    loss_entries += name.rfind("loss", 0) == 0 ? 1 : 0;
  }
  // The parameter, and its optimizer's step count (plus Adam's two moments for ArcFace).
  CHECK(loss_entries == (loss == "arcface" ? 4 : 2));
}

}  // namespace

TEST_CASE("dml train: loss triplet trains", "[tools][train]") { check_loss_trains("triplet"); }
TEST_CASE("dml train: loss contrastive trains", "[tools][train]") {
  check_loss_trains("contrastive");
}
TEST_CASE("dml train: loss margin trains the model and beta", "[tools][train]") {
  check_loss_trains("margin");
}
TEST_CASE("dml train: loss multi_similarity trains", "[tools][train]") {
  check_loss_trains("multi_similarity");
}
TEST_CASE("dml train: loss arcface trains the model and the class centers", "[tools][train]") {
  check_loss_trains("arcface");
}
TEST_CASE("dml train: loss lifted trains", "[tools][train]") { check_loss_trains("lifted"); }
TEST_CASE("dml train: loss npair trains", "[tools][train]") { check_loss_trains("npair"); }

TEST_CASE("dml train: arcface resumed mid-epoch is bit-identical, centers included",
          "[tools][train]") {
  check_resume_bit_identical("arcface", 1, 2, 1);
}
TEST_CASE("dml train: margin resumed at an epoch's end is bit-identical, beta included",
          "[tools][train]") {
  check_resume_bit_identical("margin", 2, 1, 1);
}

TEST_CASE("dml train: an optimizer group with lr 0 leaves its parameters untouched",
          "[tools][train]") {
  test::TempDir out;
  const json frozen_conv1 = {
      {"optimizer", {{"groups", {{{"match", "conv1."}, {"lr", 0}}, {{"match", "fc2."}}}}}}};
  const dml::TrainConfig config = tiny_config("triplet", out.file("run"), 2, frozen_conv1);
  REQUIRE(dml::train(config, dml::TrainOptions()) == 0);
  const InitialState init = initial_state(config);
  const auto tensors = checkpoint_tensors(out.file("run"));
  CHECK(tensors.at("model.conv1.weight").bytes == bytes_of(init.model.at("conv1.weight")));
  CHECK(tensors.at("model.conv1.bias").bytes == bytes_of(init.model.at("conv1.bias")));
  CHECK(tensors.at("model.conv2.weight").bytes != bytes_of(init.model.at("conv2.weight")));
  CHECK(tensors.at("model.fc2.weight").bytes != bytes_of(init.model.at("fc2.weight")));

  // A group whose prefix matches nothing is a config error (exit code 2) naming it.
  const json typo = {{"optimizer", {{"groups", {{{"match", "fc3."}}}}}}};
  CHECK_THROWS_WITH(
      dml::train(tiny_config("triplet", out.file("typo"), 1, typo), dml::TrainOptions()),
      Catch::Matchers::Contains(
          "config key 'optimizer.groups[0].match' (\"fc3.\") matches no parameter"));
}
