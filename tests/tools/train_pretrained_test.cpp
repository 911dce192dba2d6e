// `dml train` with model.pretrained (tools/dml/config.h): the file's weights are the starting
// point (all but model.pretrained_skip, which keep their fresh initialization), a missing file is a
// usage error naming the key, and a file for another model is a runtime error naming its keys.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/io/safetensors.h"
#include "engine/random.h"
#include "models/registry.h"
#include "models/weights.h"
#include "tests/io/io_test_util.h"
#include "tests/tools/tiny_training.h"
#include "tools/dml/args.h"
#include "tools/dml/load_model.h"
#include "tools/dml/trainer.h"

using nlohmann::json;
using tiny_training::checkpoint_tensors;
using tiny_training::tiny_config;

namespace {

// A C2F2 (D = 8) drawn from another seed than the run's, saved as the "pretrained" file.
std::map<std::string, engine::Tensor> write_pretrained(const std::string& path, int64_t dim) {
  models::ModelConfig config;
  config.embedding_dim = dim;
  engine::Generator gen(12345);
  const auto model = models::build_model(config, gen);
  models::save_weights(*model, path);
  std::map<std::string, engine::Tensor> state;
  for (const auto& [name, t] : model->state_dict()) state[name] = t;
  return state;
}

// One training step in which only fc2 learns (the other layers' lr is 0, and Adam with lr 0 and
// no weight decay leaves a parameter bit-identical), so the checkpoint shows where each layer
// started.
json frozen_but_fc2(const std::string& pretrained, const json& skip) {
  return {{"model", {{"pretrained", pretrained}, {"pretrained_skip", skip}}},
          {"optimizer",
           {{"groups", {{{"match", "conv"}, {"lr", 0.0}}, {{"match", "fc1."}, {"lr", 0.0}}}}}}};
}

}  // namespace

TEST_CASE("dml train: model.pretrained starts from the file, skipped prefixes from the init",
          "[tools][train][pretrained]") {
  test::TempDir out;
  const auto file = write_pretrained(out.file("pretrained.safetensors"), 8);
  const dml::TrainConfig config =
      tiny_config("triplet", out.file("run"), 1,
                  frozen_but_fc2(out.file("pretrained.safetensors"), json::array({"fc2."})));
  REQUIRE(dml::train(config, dml::TrainOptions()) == 0);
  const auto tensors = checkpoint_tensors(out.file("run"));
  for (const char* name : {"conv1.weight", "conv2.bias", "fc1.weight"}) {
    INFO(name);
    CHECK(tensors.at(std::string("model.") + name).bytes ==
          engine::raw_from_tensor(file.at(name)).bytes);
  }
  // fc2 came from the run's own init (seed 5), then took one step: it is not the file's.
  CHECK(tensors.at("model.fc2.weight").bytes !=
        engine::raw_from_tensor(file.at("fc2.weight")).bytes);

  // With nothing skipped and fc2 frozen too, the whole model is the file's.
  json all_frozen = frozen_but_fc2(out.file("pretrained.safetensors"), json::array());
  all_frozen["optimizer"]["groups"].push_back({{"match", "fc2."}, {"lr", 0.0}});
  all_frozen["optimizer"]["lr"] = 1e-3;
  // Every parameter is in a group with lr 0, so the default group is empty.
  REQUIRE(dml::train(tiny_config("triplet", out.file("all"), 1, all_frozen), dml::TrainOptions()) ==
          0);
  const auto all = checkpoint_tensors(out.file("all"));
  for (const auto& [name, t] : file) {
    INFO(name);
    CHECK(all.at("model." + name).bytes == engine::raw_from_tensor(t).bytes);
  }
}

TEST_CASE("dml train: a missing or mismatched model.pretrained is an error naming it",
          "[tools][train][pretrained]") {
  test::TempDir out;
  const dml::TrainConfig missing = tiny_config(
      "triplet", out.file("run"), 1, {{"model", {{"pretrained", out.file("nonexistent")}}}});
  REQUIRE_THROWS_WITH(dml::train(missing, dml::TrainOptions()),
                      Catch::Contains("'model.pretrained'") && Catch::Contains("nonexistent"));
  write_pretrained(out.file("d16.safetensors"), 16);
  const dml::TrainConfig other = tiny_config(
      "triplet", out.file("run2"), 1,
      {{"model",
        {{"pretrained", out.file("d16.safetensors")}, {"pretrained_skip", json::array()}}}});
  REQUIRE_THROWS_WITH(dml::train(other, dml::TrainOptions()),
                      Catch::Contains("d16.safetensors") && Catch::Contains("'fc2.weight'"));
  CHECK_THROWS_AS(tiny_config("triplet", out.file("run3"), 1,
                              {{"model", {{"pretrained_skip", json::array({""})}}}}),
                  dml::UsageError);
}

TEST_CASE("dml train: model.pretrained reads a torch.save .pth; --checkpoint refuses one",
          "[tools][train][pretrained]") {
  // conv1 and fc2 (D = 2) of a C2F2, element i of each tensor ((37 i) mod 101 - 50) / 64
  // (tests/io/make_torch_fixtures.py); only conv1 is taken, and it does not learn.
  const std::string pth =
      std::string(ENGINE_SOURCE_DIR) + "/tests/io/pth_fixtures/c2f2_partial.pth";
  test::TempDir out;
  REQUIRE(dml::train(tiny_config("triplet", out.file("run"), 1,
                                 frozen_but_fc2(pth, json::array({"conv2.", "fc1.", "fc2."}))),
                     dml::TrainOptions()) == 0);
  const auto tensors = checkpoint_tensors(out.file("run"));
  const std::vector<double> conv1 =
      engine::tensor_from_raw(tensors.at("model.conv1.weight")).to_vector();
  REQUIRE(conv1.size() == 800);
  CHECK(conv1[0] == -0.78125);    // (0 - 50) / 64
  CHECK(conv1[1] == -0.203125);   // (37 - 50) / 64
  CHECK(conv1[799] == 0.328125);  // (29563 mod 101 = 71, 71 - 50) / 64
  CHECK(engine::tensor_from_raw(tensors.at("model.conv1.bias")).to_vector()[31] ==
        -0.21875);  // (1147 mod 101 = 36, 36 - 50) / 64
  CHECK_THROWS_AS(dml::load_trained_model(pth, engine::Device::cpu()), dml::UsageError);
}

TEST_CASE("dml train: model.aux_bn_noise perturbs the aux BN branches, and a resume is exact",
          "[tools][train][pretrained]") {
  test::TempDir out;
  // Every parameter in a group with lr 0: the checkpoint shows the initial values.
  const json frozen = {{"optimizer",
                        {{"groups",
                          {{{"match", "conv"}, {"lr", 0.0}},
                           {{"match", "bn"}, {"lr", 0.0}},
                           {{"match", "fc"}, {"lr", 0.0}}}}}}};
  auto with_noise = [&](double noise) {
    json extra = frozen;
    extra["model"] = {{"name", "c2f2-bn"}, {"bn_branches", 2}, {"aux_bn_noise", noise}};
    return extra;
  };
  REQUIRE(dml::train(tiny_config("triplet", out.file("plain"), 1, with_noise(0.0)),
                     dml::TrainOptions()) == 0);
  REQUIRE(dml::train(tiny_config("triplet", out.file("noisy"), 1, with_noise(0.05)),
                     dml::TrainOptions()) == 0);
  const auto plain = checkpoint_tensors(out.file("plain"));
  const auto noisy = checkpoint_tensors(out.file("noisy"));
  for (const char* bn : {"model.bn1.", "model.bn3."}) {
    INFO(bn);
    const std::string main = std::string(bn) + "weight", aux = std::string(bn) + "aux_bn.0.weight";
    CHECK(plain.at(aux).bytes == plain.at(main).bytes);   // exact copies without noise
    CHECK(noisy.at(main).bytes == plain.at(main).bytes);  // branch 0 untouched
    CHECK(noisy.at(aux).bytes != noisy.at(main).bytes);   // the aux branch moved
  }
  CHECK(noisy.at("model.conv1.weight").bytes == plain.at("model.conv1.weight").bytes);
  // Stopped and resumed (now learning), the run equals the uninterrupted one: on --resume the
  // checkpoint's weights are what counts, noise or not.
  tiny_training::check_resume_bit_identical(
      out.file("resume"), "triplet", 2,
      {{"model", {{"name", "c2f2-bn"}, {"bn_branches", 2}, {"aux_bn_noise", 0.05}}}}, 1);
}

TEST_CASE("dml train: data.transform is kept with the weights for eval, attack and report",
          "[tools][train]") {
  test::TempDir out;
  // MNIST has no image transform, so this trains as usual; the recipe still travels with the
  // weights, and the commands that reopen the dataset (load_trained_model) read it back.
  REQUIRE(dml::train(tiny_config("triplet", out.file("revisiting"), 1,
                                 {{"data", {{"transform", "revisiting"}}}}),
                     dml::TrainOptions()) == 0);
  REQUIRE(dml::train(tiny_config("triplet", out.file("default"), 1), dml::TrainOptions()) == 0);
  for (const char* file : {"/checkpoint.safetensors", "/model.safetensors"}) {
    INFO(file);
    CHECK(dml::load_trained_model(out.file("revisiting") + file, engine::Device::cpu()).transform ==
          "revisiting");
    CHECK(dml::load_trained_model(out.file("default") + file, engine::Device::cpu()).transform ==
          "robrank");
  }
  CHECK_THROWS_AS(tiny_config("triplet", out.file("bad"), 1, {{"data", {{"transform", "vgg"}}}}),
                  dml::UsageError);
}
