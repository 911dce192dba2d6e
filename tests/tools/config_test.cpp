// The `dml train` config parser (tools/dml/config.h): the loss keys (every loss of loss_names(),
// per-loss margin defaults, per-loss hyper-parameters), optimizer parameter groups (parsing,
// defaults, first-match-wins assignment) and the errors (exit code 2 = dml::UsageError) that name
// the offending key. Expected values are the papers' / robrank's numbers written out here, never
// read back from the code under test.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/precision.h"
#include "tests/io/io_test_util.h"
#include "tools/dml/args.h"
#include "tools/dml/config.h"

using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

dml::TrainConfig resolve(const json& config) { return dml::resolve_config(config, "t.json"); }

// The message of the UsageError that resolving `config` throws ("" if none is thrown).
std::string usage_error(const json& config) {
  try {
    resolve(config);
  } catch (const dml::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("config: loss.name accepts every documented loss, and nothing else", "[tools][config]") {
  for (const std::string name :
       {"triplet", "contrastive", "margin", "multi_similarity", "arcface", "lifted", "npair"}) {
    CHECK(dml::loss_name(resolve({{"loss", {{"name", name}}}}).loss) == name);
  }
  const std::string message = usage_error({{"loss", {{"name", "softmax"}}}});
  CHECK_THAT(message, Contains("t.json: config key 'loss.name' must be one of triplet, "
                               "contrastive, margin, multi_similarity, arcface, lifted, npair"));
  CHECK_THAT(message, Contains("\"softmax\""));
}

TEST_CASE("config: loss.margin null gives each loss its paper's margin", "[tools][config]") {
  auto margin_of = [](const std::string& loss, const std::string& metric) {
    return resolve({{"loss", {{"name", loss}, {"metric", metric}}}}).margin;
  };
  // robrank: triplet and lifted 0.2 for N and C, 1.0 for E; contrastive 1.0 for every metric;
  // margin loss m = 0.2; ArcFace (MDProp §C.1.2) angular margin 0.5.
  CHECK(margin_of("triplet", "N") == 0.2);
  CHECK(margin_of("triplet", "C") == 0.2);
  CHECK(margin_of("triplet", "E") == 1.0);
  CHECK(margin_of("lifted", "N") == 0.2);
  CHECK(margin_of("lifted", "E") == 1.0);
  CHECK(margin_of("contrastive", "N") == 1.0);
  CHECK(margin_of("contrastive", "E") == 1.0);
  CHECK(margin_of("margin", "E") == 0.2);
  CHECK(margin_of("arcface", "N") == 0.5);

  // An explicit margin reaches the loss's own options too.
  const dml::TrainConfig m = resolve({{"loss", {{"name", "margin"}, {"margin", 0.3}}}});
  CHECK(m.margin == 0.3);
  CHECK(m.margin_loss.margin == 0.3);
  const dml::TrainConfig a = resolve({{"loss", {{"name", "arcface"}, {"margin", 0.35}}}});
  CHECK(a.arcface.margin == 0.35);
}

TEST_CASE("config: per-loss hyper-parameters default to the papers' and can be set",
          "[tools][config]") {
  const dml::TrainConfig d = resolve(json::object());
  CHECK(d.margin_loss.beta == 0.6);  // robrank margin.py: beta starts at 0.6, SGD lr 5e-4
  CHECK(d.margin_loss.beta_lr == 5e-4);
  CHECK(d.multi_similarity.alpha == 2.0);  // MDProp §C.1.1
  CHECK(d.multi_similarity.beta == 40.0);
  CHECK(d.multi_similarity.lambda == 0.5);
  CHECK(d.multi_similarity.epsilon == 0.1);
  CHECK_FALSE(d.multi_similarity.spc2_anchors);
  CHECK(d.arcface.scale == 16.0);  // MDProp §C.1.2
  CHECK(d.arcface.centers_lr == 5e-4);
  CHECK_FALSE(d.arcface.revisiting_compat);
  CHECK(d.lifted_norm_weight == 5e-3);  // robrank lifted.py / npair.py: 5e-3 x mean norm
  CHECK(d.npair_norm_weight == 5e-3);

  const dml::TrainConfig s = resolve(
      {{"loss",
        {{"name", "multi_similarity"},
         {"margin_loss", {{"beta", -0.5}, {"beta_lr", 0}}},
         {"multi_similarity",
          {{"alpha", 3}, {"beta", 50}, {"lambda", 0.25}, {"epsilon", 0}, {"spc2_anchors", true}}},
         {"arcface", {{"scale", 32}, {"centers_lr", 1e-2}, {"revisiting_compat", true}}},
         {"lifted", {{"norm_weight", 0}}},
         {"npair", {{"norm_weight", 1e-2}}}}}});
  CHECK(s.margin_loss.beta == -0.5);
  CHECK(s.margin_loss.beta_lr == 0.0);
  CHECK(s.multi_similarity.alpha == 3.0);
  CHECK(s.multi_similarity.beta == 50.0);
  CHECK(s.multi_similarity.lambda == 0.25);
  CHECK(s.multi_similarity.epsilon == 0.0);
  CHECK(s.multi_similarity.spc2_anchors);
  CHECK(s.arcface.scale == 32.0);
  CHECK(s.arcface.centers_lr == 1e-2);
  CHECK(s.arcface.revisiting_compat);
  CHECK(s.lifted_norm_weight == 0.0);
  CHECK(s.npair_norm_weight == 1e-2);
  // The resolved config (what checkpoints store) holds every key, given or default.
  CHECK(s.resolved["loss"]["multi_similarity"]["alpha"] == 3);
  CHECK(s.resolved["loss"]["margin_loss"]["beta_lr"] == 0);
  CHECK(d.resolved["loss"]["arcface"]["scale"] == 16.0);
}

TEST_CASE("config: bad loss keys are errors naming the key", "[tools][config]") {
  CHECK_THAT(usage_error({{"loss", {{"multi_similarity", {{"gamma", 1}}}}}}),
             Contains("config key 'loss.multi_similarity.gamma' is unknown"));
  CHECK_THAT(usage_error({{"loss", {{"arcface", {{"scale", "big"}}}}}}),
             Contains("config key 'loss.arcface.scale' must be a number, got a string"));
  CHECK_THAT(usage_error({{"loss", {{"multi_similarity", {{"alpha", 0}}}}}}),
             Contains("config key 'loss.multi_similarity.alpha' must be a finite number > 0"));
  CHECK_THAT(usage_error({{"loss", {{"margin_loss", {{"beta_lr", -1e-3}}}}}}),
             Contains("config key 'loss.margin_loss.beta_lr' must be a finite number >= 0"));
  CHECK_THAT(usage_error({{"loss", {{"multi_similarity", {{"spc2_anchors", 1}}}}}}),
             Contains("config key 'loss.multi_similarity.spc2_anchors' must be a boolean"));
  // Keys that do not apply to the chosen loss are refused rather than silently ignored.
  CHECK_THAT(usage_error({{"loss", {{"name", "npair"}, {"margin", 0.5}}}}),
             Contains("config key 'loss.margin' does not apply to loss 'npair'"));
  CHECK_THAT(usage_error({{"loss", {{"name", "arcface"}, {"miner", "semihard"}}}}),
             Contains("config key 'loss.miner' does not apply to loss 'arcface'"));
  CHECK(usage_error({{"loss", {{"name", "margin"}, {"miner", "distance"}}}}).empty());
}

TEST_CASE("config: data.num_workers is bounded above as well as below", "[tools][config]") {
  // A million threads would fail in the loader mid-start; the config names the key instead.
  CHECK_THAT(usage_error({{"data", {{"num_workers", 1000000}}}}),
             Contains("config key 'data.num_workers' must be in 0..256"));
  CHECK_THAT(usage_error({{"data", {{"num_workers", -1}}}}),
             Contains("config key 'data.num_workers' must be in 0..256"));
  CHECK(resolve({{"data", {{"num_workers", 256}}}}).num_workers == 256);
}

TEST_CASE("config: optimizer.groups are parsed, defaulted from optimizer.* and stored filled",
          "[tools][config]") {
  const dml::TrainConfig none = resolve(json::object());
  CHECK(none.optimizer.groups.empty());
  CHECK(none.resolved["optimizer"]["groups"] == json::array());

  const dml::TrainConfig t =
      resolve({{"optimizer",
                {{"lr", 2e-3},
                 {"weight_decay", 1e-7},
                 {"groups",
                  {{{"match", "fc2."}, {"lr", 1e-2}},
                   {{"match", "conv"}, {"weight_decay", 0}},
                   {{"match", "fc1.bias"}, {"lr", 0}, {"weight_decay", 1e-4}}}}}}});
  REQUIRE(t.optimizer.groups.size() == 3);
  CHECK(t.optimizer.groups[0].match == "fc2.");
  CHECK(t.optimizer.groups[0].lr == 1e-2);
  CHECK(t.optimizer.groups[0].weight_decay == 1e-7);  // null: optimizer.weight_decay
  CHECK(t.optimizer.groups[1].match == "conv");
  CHECK(t.optimizer.groups[1].lr == 2e-3);  // null: optimizer.lr
  CHECK(t.optimizer.groups[1].weight_decay == 0.0);
  CHECK(t.optimizer.groups[2].lr == 0.0);  // lr 0 freezes a group
  CHECK(t.optimizer.groups[2].weight_decay == 1e-4);
  const json expected_first = {{"match", "fc2."}, {"lr", 1e-2}, {"weight_decay", nullptr}};
  CHECK(t.resolved["optimizer"]["groups"][0] == expected_first);
}

TEST_CASE("config: mistakes inside optimizer.groups name the group and the key",
          "[tools][config]") {
  auto with_groups = [](const json& groups) { return json{{"optimizer", {{"groups", groups}}}}; };
  CHECK_THAT(usage_error(with_groups({{{"match", "fc2."}, {"lrr", 1e-2}}})),
             Contains("t.json: config key 'optimizer.groups[0].lrr' is unknown"));
  CHECK_THAT(
      usage_error(with_groups({{{"match", "fc1."}}, {{"match", "fc2."}, {"lr", "fast"}}})),
      Contains("config key 'optimizer.groups[1].lr' must be a number or null, got a string"));
  CHECK_THAT(
      usage_error(with_groups({{{"match", "fc2."}, {"weight_decay", -1}}})),
      Contains("config key 'optimizer.groups[0].weight_decay' must be a finite number >= 0"));
  CHECK_THAT(usage_error(with_groups({{{"lr", 1e-2}}})),
             Contains("config key 'optimizer.groups[0].match' is missing"));
  CHECK_THAT(usage_error(with_groups({{{"match", ""}}})),
             Contains("config key 'optimizer.groups[0].match' must not be empty"));
  CHECK_THAT(usage_error(with_groups({{{"match", 7}}})),
             Contains("config key 'optimizer.groups[0].match' must be a string, got an integer"));
  CHECK_THAT(usage_error(with_groups({"fc2."})),
             Contains("config key 'optimizer.groups[0]' must be an object"));
  CHECK_THAT(usage_error(with_groups({{"match", "fc2."}})),
             Contains("config key 'optimizer.groups' must be an array, got an object"));
}

TEST_CASE("config: --set replaces optimizer.groups whole", "[tools][config]") {
  json config = json::object();
  dml::apply_override(config, R"(optimizer.groups=[{"match": "fc2.", "lr": 0.01}])");
  const dml::TrainConfig t = resolve(config);
  REQUIRE(t.optimizer.groups.size() == 1);
  CHECK(t.optimizer.groups[0].lr == 0.01);
  CHECK_THROWS_WITH(dml::apply_override(config, "optimizer.groups.0.lr=1"),
                    Contains("config key 'optimizer.groups' is a list: set it whole"));
  dml::apply_override(config, "loss.multi_similarity.beta=45");
  CHECK(resolve(config).multi_similarity.beta == 45.0);
}

TEST_CASE("config: a parameter goes to the first group whose match prefixes its name",
          "[tools][config]") {
  const std::vector<std::string> names = {"conv1.weight", "conv1.bias", "conv2.weight",
                                          "fc1.weight",   "fc1.bias",   "fc2.weight"};
  std::vector<dml::ParamGroupConfig> groups(3);
  groups[0].match = "fc1.b";
  groups[1].match = "fc";
  groups[2].match = "conv2.";
  // 0 = the default group; g + 1 = groups[g]. fc1.bias matches "fc1.b" and "fc": the first wins.
  CHECK(dml::assign_param_groups(names, groups) == std::vector<size_t>{0, 0, 3, 2, 1, 2});
  CHECK(dml::assign_param_groups(names, {}) == std::vector<size_t>(6, 0));

  std::vector<dml::ParamGroupConfig> typo(1);
  typo[0].match = "fc3.";
  CHECK_THROWS_WITH(
      dml::assign_param_groups(names, typo),
      Contains("config key 'optimizer.groups[0].match' (\"fc3.\") matches no parameter; the "
               "model's parameter names start with conv1., conv2., fc1., fc2."));
  std::vector<dml::ParamGroupConfig> shadowed(2);
  shadowed[0].match = "fc";
  shadowed[1].match = "fc2.";
  CHECK_THROWS_WITH(dml::assign_param_groups(names, shadowed),
                    Contains("'optimizer.groups[1].match' (\"fc2.\") only matches parameters an "
                             "earlier group already took"));
}

TEST_CASE("config: a config written before the new keys resolves to today's defaults",
          "[tools][config]") {
  // What checkpoints of the first `dml train` stored: the schema without the loss sub-objects and
  // without optimizer.groups. --resume resolves it again before comparing, so it must equal a fresh
  // config's resolution.
  json old = dml::default_config_json();
  for (const char* key : {"margin_loss", "multi_similarity", "arcface", "lifted", "npair"}) {
    REQUIRE(old["loss"].erase(key) == 1);
  }
  REQUIRE(old["optimizer"].erase("groups") == 1);
  REQUIRE(old["model"].erase("aux_bn_noise") == 1);
  REQUIRE(old["sampler"].erase("with_replacement") == 1);
  REQUIRE(old["data"].erase("transform") == 1);
  REQUIRE(old["eval"].erase("kmeans_restarts") == 1);
  CHECK(resolve(old).resolved == resolve(json::object()).resolved);
}

TEST_CASE("config: every reference config in configs/ resolves, defenses as documented",
          "[tools][config]") {
  // A typo in a shipped config would only show when a user runs it; resolve them all here.
  int64_t count = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(std::string(ENGINE_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".json") continue;
    INFO(entry.path().string());
    const dml::TrainConfig t =
        dml::resolve_config(dml::load_config_file(entry.path().string()), entry.path().string());
    ++count;
    const std::string stem = entry.path().stem().string();
    // The file name says the recipe and the attack: *-fgsm is one step, the others the papers'.
    const std::string recipe = attacks::defenses::recipe_name(t.defense.recipe);
    if (recipe != "none") CHECK(stem.rfind(recipe, 0) == 0);
    if (entry.path().parent_path().filename() == "bench") {
      // The benchmark configs time the eta = 32 step (issue 33) on data that needs no download.
      CHECK(t.defense.pgd.steps == 32);
      CHECK(t.data_name == "synthetic");
    }
    const bool fashion = entry.path().parent_path().filename() == "fashion";
    if (fashion && stem.rfind("mdprop-", 0) == 0) {
      // docs/defenses.md, MDProp on Fashion-MNIST: multi-similarity on C2F2-BN with D = 128; the
      // defenses one PGD step of eps = alpha = 0.01, K = adversarial branches + 1 (1 shared).
      CHECK(t.loss == dml::Loss::MultiSimilarity);
      CHECK(t.model.name == "c2f2-bn");
      CHECK(t.model.embedding_dim == 128);
      if (recipe == "mdprop") {
        CHECK(t.defense.pgd.eps == 0.01);
        CHECK(t.defense.pgd.alpha == 0.01);
        CHECK(t.defense.pgd.steps == 1);
        const int64_t branches = static_cast<int64_t>(t.defense.mdprop.targets.size()) + 1;
        CHECK(t.model.bn_branches == (t.defense.mdprop.shared_bn ? 1 : branches));
      }
    } else if (fashion && recipe != "none") {
      // docs/defenses.md: eps = 77/255, alpha = 3/255; eta = 32 (or 1 for FGSM).
      CHECK(t.defense.pgd.eps == Approx(77.0 / 255.0));
      CHECK(t.defense.pgd.alpha == Approx(3.0 / 255.0));
      CHECK(t.defense.pgd.steps == (stem.find("fgsm") != std::string::npos ? 1 : 32));
      // Tables 4 to 6 of Zhou et al. TPAMI: <recipe>-b<beta> trains with triplet margin beta (the
      // loss's and so the defense's); ses-w3 is SES with eq. 19's weight (docs/defenses.md).
      const size_t b = stem.find("-b");
      if (b != std::string::npos) CHECK(t.margin == Approx(std::stod(stem.substr(b + 2))));
      if (stem == "ses-w3") CHECK(t.defense.ses_weight == 3.0);
    }
    if (entry.path().parent_path().filename() != "configs") {
      // Reproductions pin strict FP32 in the file itself, not through the default (config.md).
      CHECK(dml::load_config_file(entry.path().string()).at("precision") == "fp32");
      CHECK(t.precision == engine::Precision::Fp32);
    }
    if (recipe == "hm" && t.defense.hm.ics) {
      // ICS weight: 0.5, except 0.05 on SOP (HM §4; robrank defenses/amd.py).
      const bool sop = entry.path().parent_path().filename() == "sop";
      CHECK(t.defense.hm.ics_lambda == Approx(sop ? 0.05 : 0.5));
    }
  }
  CHECK(count >= 44);  // quick + 28 fashion (6 of them MDProp's, 10 of Tables 4-6) + 5 cub + 4 cars
                       // + 4 sop + 2 bench
}

TEST_CASE("config: a file that is not a clean JSON object is a usage error naming the key",
          "[tools][config]") {
  test::TempDir dir;
  auto load = [&](const std::string& text) {
    test::write_bytes(dir.file("c.json"), std::vector<uint8_t>(text.begin(), text.end()));
    return dml::load_config_file(dir.file("c.json"));
  };
  // A number beyond a double's range: nlohmann throws out_of_range, which was "unexpected error".
  REQUIRE_THROWS_AS(load(R"({"epochs": 1e999})"), dml::UsageError);
  REQUIRE_THROWS_WITH(load(R"({"epochs": 1e999})"),
                      Contains("not valid JSON (at key 'epochs')") && Contains("c.json"));
  REQUIRE_THROWS_WITH(load(R"({"optimizer": {"groups": [{"match": "fc", "lr": -1e999}]}})"),
                      Contains("at key 'optimizer.groups.lr'"));
  // The same key twice: a parser keeps one silently, so the config would not do what it says.
  REQUIRE_THROWS_WITH(load(R"({"epochs": 1, "epochs": 2})"),
                      Contains("key 'epochs' is written twice"));
  REQUIRE_THROWS_WITH(load(R"({"loss": {"name": "triplet", "metric": "E", "metric": "C"}})"),
                      Contains("key 'loss.metric' is written twice"));
  // The same key in two objects is no duplicate.
  CHECK(load(R"({"loss": {"margin": 0.2}, "defense": {"hm": {"margin": 0.2}}})").is_object());
  REQUIRE_THROWS_WITH(load(R"({"epochs": 1,})"), Contains("not valid JSON"));
  REQUIRE_THROWS_WITH(load("[1, 2]"), Contains("must hold a JSON object"));
  REQUIRE_THROWS_AS(dml::load_config_file(dir.file("")), dml::UsageError);
  REQUIRE_THROWS_WITH(dml::load_config_file(dir.file("")), Contains("is a folder"));
  REQUIRE_THROWS_WITH(dml::load_config_file(dir.file("missing.json")),
                      Contains("cannot be opened"));
}

TEST_CASE("config: what the rest of dml refuses is refused when the config is read",
          "[tools][config]") {
  auto resolve = [](const json& config) { return dml::resolve_config(config, "c.json"); };
  // An attack spec refuses eps > 1 (pixels are in [0, 1]); the defense's PGD the same.
  REQUIRE_THROWS_WITH(resolve({{"defense", {{"name", "est"}, {"pgd", {{"eps", 2.0}}}}}}),
                      Contains("'defense.pgd.eps' must be <= 1"));
  CHECK(resolve({{"defense", {{"name", "est"}, {"pgd", {{"eps", 1.0}}}}}}).defense.pgd.eps == 1.0);
  // The device's spelling is checked with the rest (a missing GPU only when training starts).
  REQUIRE_THROWS_AS(resolve({{"device", "tpu"}}), dml::UsageError);
  REQUIRE_THROWS_WITH(resolve({{"device", "tpu"}}), Contains("config key 'device'"));
  CHECK(resolve({{"device", "cuda:0"}}).device == "cuda:0");
  // Epochs are bounded, so epochs x batches stays inside the int64 step counter.
  REQUIRE_THROWS_WITH(resolve({{"epochs", int64_t{4611686018427387904}}}),
                      Contains("'epochs' must be in 1..1000000"));
  // NMI's k-means restarts: at least the one run (metrics/clustering.h refuses 0).
  CHECK(resolve(json::object()).eval_kmeans_restarts == 1);
  CHECK(resolve({{"eval", {{"kmeans_restarts", 20}}}}).eval_kmeans_restarts == 20);
  REQUIRE_THROWS_WITH(resolve({{"eval", {{"kmeans_restarts", 0}}}}),
                      Contains("'eval.kmeans_restarts' must be in 1..1000"));
}

TEST_CASE("config: defense.hm.loss_upper and defense.hm.ics_margin (HM supplement Tables 7, 10)",
          "[tools][config]") {
  const dml::TrainConfig d = resolve(json::object());
  CHECK(d.defense.hm.loss_upper == 0.0);  // u = gamma
  CHECK(d.defense.hm.ics_margin == 0.0);
  const dml::TrainConfig s =
      resolve({{"defense", {{"hm", {{"loss_upper", 2.2}, {"ics_margin", 0.2}}}}}});
  CHECK(s.defense.hm.loss_upper == 2.2);
  CHECK(s.defense.hm.ics_margin == 0.2);
  CHECK(s.resolved["defense"]["hm"]["loss_upper"] == 2.2);
  CHECK_THAT(usage_error({{"defense", {{"hm", {{"loss_upper", -1}}}}}}),
             Contains("config key 'defense.hm.loss_upper' must be a finite number >= 0"));
  CHECK_THAT(usage_error({{"defense", {{"hm", {{"ics_margin", "wide"}}}}}}),
             Contains("config key 'defense.hm.ics_margin' must be a number, got a string"));
}

TEST_CASE("config: defense.act.anchor (robrank's ACT anchor before and after its issue #7)",
          "[tools][config]") {
  const dml::TrainConfig d = resolve(json::object());
  CHECK(d.defense.act_anchor == attacks::defenses::ActAnchor::Normalized);
  CHECK(d.resolved["defense"]["act"]["anchor"] == "normalized");
  const dml::TrainConfig s = resolve({{"defense", {{"act", {{"anchor", "unnormalized"}}}}}});
  CHECK(s.defense.act_anchor == attacks::defenses::ActAnchor::Unnormalized);
  CHECK_THAT(usage_error({{"defense", {{"act", {{"anchor", "raw"}}}}}}),
             Contains("config key 'defense.act.anchor' must be one of normalized, unnormalized, "
                      "got \"raw\""));
}

TEST_CASE("config: defense.mdprop.shared_bn (MDProp Appendix C.2) needs one BN branch",
          "[tools][config]") {
  CHECK_FALSE(resolve(json::object()).defense.mdprop.shared_bn);
  const json mtax = {{"name", "mdprop"}, {"mdprop", {{"targets", {5}}, {"shared_bn", true}}}};
  const dml::TrainConfig s =
      resolve({{"model", {{"name", "c2f2-bn"}, {"bn_branches", 1}}}, {"defense", mtax}});
  CHECK(s.defense.mdprop.shared_bn);
  CHECK(s.defense.mdprop.targets == std::vector<int64_t>{5});
  CHECK(resolve({{"model", {{"name", "c2f2"}}}, {"defense", mtax}}).defense.mdprop.shared_bn);
  CHECK_THAT(usage_error({{"model", {{"name", "c2f2-bn"}, {"bn_branches", 2}}}, {"defense", mtax}}),
             Contains("config key 'model.bn_branches' must be 1 for defense mdprop with "
                      "mdprop.shared_bn"));
}
