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
#include "tests/tools/tiny_training.h"
#include "tools/dml/config.h"
#include "tools/dml/trainer.h"

using nlohmann::json;

namespace {

using tiny_training::checkpoint_tensors;
using tiny_training::data_root;
using tiny_training::kClasses;
using tiny_training::kEmbeddingDim;
using tiny_training::log_records;
using tiny_training::tiny_config;

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
  int64_t loss_entries = 0;
  for (const std::string& name : tiny_training::check_resume_bit_identical(
           out.file("run"), loss, steps_per_epoch, {{"epochs", epochs}}, stop_after)) {
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
