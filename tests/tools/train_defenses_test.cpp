// Tiny `dml train` runs with every defense (attacks/defenses/defense.h) on the generated data set
// of tiny_training.h: each recipe trains (finite losses, the first and last layers move), logs its
// cost (passes per batch = PGD steps + 1) and its own values, and stores it in metrics.json; HM's
// state (the previous adversarial loss) and a random PGD start survive --resume bit-identically;
// MDProp trains C2F2-BN's auxiliary BN branches; the config rejects defenses that cannot run.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/io/safetensors.h"
#include "engine/nn/batch_norm.h"
#include "engine/random.h"
#include "models/registry.h"
#include "tests/io/io_test_util.h"
#include "tests/tools/tiny_training.h"
#include "tools/dml/args.h"
#include "tools/dml/config.h"
#include "tools/dml/load_model.h"
#include "tools/dml/trainer.h"

using nlohmann::json;
using tiny_training::checkpoint_tensors;
using tiny_training::log_records;
using tiny_training::tiny_config;

namespace {

// A 2-step PGD with a visible budget (pixels are in [0, 1]).
json defense(const std::string& name, const json& extra = json::object()) {
  json d = {{"name", name}, {"pgd", {{"eps", 0.1}, {"alpha", 0.05}, {"steps", 2}}}};
  d.merge_patch(extra);
  return d;
}

json read_json(const std::string& path) {
  const std::vector<uint8_t> bytes = test::read_bytes(path);
  return json::parse(bytes.begin(), bytes.end());
}

void check_defense_trains(const std::string& name, const json& extra = json::object()) {
  test::TempDir out;
  const int64_t steps = 2;
  const dml::TrainConfig config =
      tiny_config("triplet", out.file("run"), steps, {{"defense", defense(name, extra)}});
  REQUIRE(dml::train(config, dml::TrainOptions()) == 0);

  const std::vector<json> train = log_records(out.file("run"), "train");
  REQUIRE(train.size() == static_cast<size_t>(steps));
  double passes = 0.0;
  for (const json& record : train) {
    INFO(record.dump());
    CHECK(std::isfinite(record.at("loss").get<double>()));
    // SES trains on the clean loss plus the shift; the others on adversarial examples.
    for (const char* key : name == "ses" ? std::vector<const char*>{"clean_loss", "embedding_shift"}
                                         : std::vector<const char*>{"adversarial_loss"}) {
      CHECK(std::isfinite(record.at(key).get<double>()));
    }
    CHECK(std::isfinite(record.at("attack_objective").get<double>()));
    const double p = record.at("passes_per_batch").get<double>();
    // 2 PGD steps + the training pass. HM's early stop cannot end a 2-step attack sooner: it
    // compares step 0's objective (>= 0) with -1, and it takes the step of the iteration it stops
    // at (the destination differs from the source here, so the attack runs).
    CHECK(p == 3.0);
    passes += p;  // log_every_batches = 1: one batch per record
  }
  // metrics.json holds the run's total passes.
  CHECK(read_json(out.file("run/metrics.json")).at("passes").get<double>() == passes);

  // Training moved the first and last layers.
  const auto tensors = checkpoint_tensors(out.file("run"));
  engine::Generator gen(config.seed);
  const auto initial = models::build_model(config.model, gen)->state_dict();
  for (const char* layer : {"conv1.weight", "fc2.weight"}) {
    INFO(name << ": " << layer);
    CHECK(tensors.at(std::string("model.") + layer).bytes !=
          engine::raw_from_tensor(initial.at(layer)).bytes);
  }
  if (name == "hm") {
    // The gradual adversary's state, and its first destination: g_lga of the initial loss 2.0,
    // clamped to gamma = 0.2, gives -0.2 * 1 = -0.2.
    CHECK(tensors.count("defense.hm_previous_loss") == 1);
    CHECK(train.front().at("destination_hardness").get<double>() == Approx(-0.2));
  } else {
    for (const auto& [key, raw] : tensors) CHECK(key.rfind("defense.", 0) != 0);
  }
}

void check_resume_bit_identical(const json& defense_config) {
  test::TempDir out;
  // Stopped after 4 steps: mid-way through the second epoch.
  tiny_training::check_resume_bit_identical(out.file("run"), "triplet", 3,
                                            {{"epochs", 2}, {"defense", defense_config}}, 4);
}

void check_config_rejected(const json& extra, const std::string& key) {
  test::TempDir out;
  INFO(extra.dump());
  try {
    tiny_config("triplet", out.file("run"), 1, extra);
    FAIL("the config was accepted");
  } catch (const dml::UsageError& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find("'" + key + "'") != std::string::npos);
  }
}

}  // namespace

TEST_CASE("dml train: defense est trains and logs its cost", "[tools][train][defenses]") {
  check_defense_trains("est");
}
TEST_CASE("dml train: defense rest trains and logs its cost", "[tools][train][defenses]") {
  check_defense_trains("rest");
}
TEST_CASE("dml train: defense ses trains and logs its cost", "[tools][train][defenses]") {
  check_defense_trains("ses");
}
TEST_CASE("dml train: defense act trains and logs its cost", "[tools][train][defenses]") {
  check_defense_trains("act");
}
TEST_CASE("dml train: defense madry trains and logs its cost", "[tools][train][defenses]") {
  check_defense_trains("madry");
}
TEST_CASE("dml train: defense hm (softhard -> g_lga, ICS) trains and keeps its state",
          "[tools][train][defenses]") {
  check_defense_trains("hm",
                       {{"hm", {{"source", "softhard"}, {"destination", "g_lga"}, {"ics", true}}}});
}

TEST_CASE("dml train: defense mdprop trains C2F2-BN's auxiliary BN branches",
          "[tools][train][defenses]") {
  test::TempDir out;
  const json extra = {{"model", {{"name", "c2f2-bn"}, {"bn_branches", 3}}},
                      {"defense",
                       {{"name", "mdprop"},
                        {"pgd", {{"eps", 0.03}, {"alpha", 0.03}, {"steps", 1}}},
                        {"mdprop", {{"targets", {1, 2}}}}}}};
  REQUIRE(dml::train(tiny_config("triplet", out.file("run"), 2, extra), dml::TrainOptions()) == 0);
  const std::vector<json> train = log_records(out.file("run"), "train");
  REQUIRE(train.size() == 2);
  for (const json& record : train) {
    INFO(record.dump());
    CHECK(record.at("passes_per_batch").get<double>() == 3.0);  // 1 + 1 PGD step per branch
    for (const char* key : {"clean_loss", "adversarial_loss_1", "adversarial_loss_2"}) {
      CHECK(std::isfinite(record.at(key).get<double>()));
    }
  }
  // Each branch saw its own batches: the running means of the three branches of bn1 all moved
  // away from the initial 0 and differ from each other.
  const auto tensors = checkpoint_tensors(out.file("run"));
  const std::vector<uint8_t> main = tensors.at("model.bn1.running_mean").bytes;
  const std::vector<uint8_t> aux0 = tensors.at("model.bn1.aux_bn.0.running_mean").bytes;
  const std::vector<uint8_t> aux1 = tensors.at("model.bn1.aux_bn.1.running_mean").bytes;
  const std::vector<uint8_t> zeros(main.size(), 0);
  CHECK(main != zeros);
  CHECK(aux0 != zeros);
  CHECK(aux1 != zeros);
  CHECK(main != aux0);
  CHECK(aux0 != aux1);
}

TEST_CASE("dml train: hm resumed mid-epoch is bit-identical, its previous loss included",
          "[tools][train][defenses]") {
  check_resume_bit_identical(defense("hm", {{"hm", {{"destination", "g_lga"}}}}));
}

TEST_CASE("dml train: est with a random PGD start resumed mid-epoch is bit-identical",
          "[tools][train][defenses]") {
  check_resume_bit_identical(defense("est", {{"pgd", {{"random_start", true}}}}));
}

TEST_CASE("dml train: defenses the config cannot run are usage errors naming the key",
          "[tools][defenses]") {
  check_config_rejected({{"defense", {{"name", "trades"}}}}, "defense.name");
  check_config_rejected({{"defense", {{"name", "act"}}}, {"loss", {{"name", "multi_similarity"}}}},
                        "defense.name");
  check_config_rejected({{"defense", {{"name", "mdprop"}}}}, "defense.name");  // c2f2: no BN
  check_config_rejected(
      {{"defense", {{"name", "mdprop"}}}, {"model", {{"name", "c2f2-bn"}, {"bn_branches", 2}}}},
      "model.bn_branches");  // targets [1, 5] need 3 branches
  check_config_rejected({{"defense", {{"mdprop", {{"targets", {1, 0}}}}}}},
                        "defense.mdprop.targets");
  check_config_rejected({{"defense", {{"mdprop", {{"reduction", "avg"}}}}}},
                        "defense.mdprop.reduction");
  check_config_rejected({{"defense", {{"hm", {{"destination", "g_lgaa"}}}}}},
                        "defense.hm.destination");
  // HM's γ is the triplet margin too: metric E's margin 1.0 with the default γ 0.2 is refused.
  check_config_rejected({{"defense", {{"name", "hm"}}}, {"loss", {{"metric", "E"}}}},
                        "defense.hm.gamma");
  check_config_rejected(
      {{"defense", {{"name", "hm"}, {"hm", {{"gamma", 0.3}}}}}, {"loss", {{"margin", 0.2}}}},
      "defense.hm.gamma");
  check_config_rejected({{"defense", {{"pgd", {{"steps", 0}}}}}}, "defense.pgd.steps");
  check_config_rejected({{"defense", {{"pgd", {{"eps", -0.1}}}}}}, "defense.pgd.eps");
  check_config_rejected({{"defense", {{"pgd", {{"epsilon", 0.1}}}}}}, "defense.pgd.epsilon");
}

TEST_CASE("select_bn_branch: eval, attack, ers and embed --bn-branch k use BN branch k, 0 <= k < K",
          "[tools]") {
  // A C2F2-BN with K = 3 branches (MDProp {1, T}): --bn-branch 2 puts every BN layer on branch 2;
  // 3 and -1 are out of range, a usage error (exit 2, README "Exit codes") naming the option.
  models::ModelConfig config;
  config.name = "c2f2-bn";
  config.embedding_dim = 8;
  config.bn_branches = 3;
  engine::Generator gen(5);
  const std::shared_ptr<models::Model> model = models::build_model(config, gen);
  model->eval();
  const std::vector<engine::nn::BatchNorm*> layers = engine::nn::batch_norm_layers(*model);
  REQUIRE(layers.size() >= 1);
  for (const engine::nn::BatchNorm* bn : layers) CHECK(bn->eval_branch() == 0);
  dml::select_bn_branch(*model, 3, 2);
  for (const engine::nn::BatchNorm* bn : layers) CHECK(bn->eval_branch() == 2);
  dml::select_bn_branch(*model, 3, 0);
  for (const engine::nn::BatchNorm* bn : layers) CHECK(bn->eval_branch() == 0);
  CHECK_THROWS_WITH(dml::select_bn_branch(*model, 3, 3),
                    Catch::Contains("--bn-branch 3 is out of range") && Catch::Contains("0 to 2"));
  CHECK_THROWS_AS(dml::select_bn_branch(*model, 3, -1), dml::UsageError);
  // C2F2 has no BN: only branch 0 exists.
  config.name = "c2f2";
  config.bn_branches = 1;
  const std::shared_ptr<models::Model> plain = models::build_model(config, gen);
  CHECK_NOTHROW(dml::select_bn_branch(*plain, 1, 0));
  CHECK_THROWS_AS(dml::select_bn_branch(*plain, 1, 1), dml::UsageError);
}
