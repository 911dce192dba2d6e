// `dml ers --worst-case R` (tools/dml/ers_worst_case.h): the per-image worst case and its robust
// fractions beside ERS, the sanity checks in the JSON, resuming like ERS; and the collapse check
// (d) flagging a gallery whose embeddings are all equal. On a tiny C2F2 trained on the generated
// data of tiny_training.h, attacking 1 test image (2 in the eps = 1 check).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attacks/attack.h"
#include "engine/tensor.h"
#include "tests/io/io_test_util.h"
#include "tests/tools/ers_test_util.h"
#include "tests/tools/tiny_training.h"
#include "tools/dml/args.h"
#include "tools/dml/commands.h"
#include "tools/dml/ers_worst_case.h"
#include "tools/dml/trainer.h"

using nlohmann::json;

namespace {

using ers_test::read_json;
using ers_test::write_json;

int ers(const std::string& checkpoint, const std::string& out, std::vector<std::string> extra) {
  return ers_test::run_tiny_ers(checkpoint, "rob28", 1, out, extra);
}

double mean(const json& values) {
  double total = 0.0;
  for (const json& v : values) total += v.get<double>();
  return total / static_cast<double>(values.size());
}

}  // namespace

TEST_CASE("dml ers --worst-case: per-image worst case, robust fractions, sanity, resume",
          "[tools][ers][worst]") {
  test::TempDir dir;
  REQUIRE(dml::train(tiny_training::tiny_config("triplet", dir.file("run"), 2),
                     dml::TrainOptions()) == 0);
  const std::string checkpoint = dir.file("run/model.safetensors");
  const std::vector<std::string> worst_options = {"--worst-case", "1", "--sanity-images", "0"};
  REQUIRE(ers(checkpoint, dir.file("whole.json"), worst_options) == 0);
  const json whole = read_json(dir.file("whole.json"));
  CHECK(whole.at("complete") == true);
  // Restart 0 is the profile's own run: the same ERS and attacks as a run without the option,
  // whose file has no new key.
  REQUIRE(ers(checkpoint, dir.file("plain.json"), {}) == 0);
  const json plain = read_json(dir.file("plain.json"));
  CHECK_FALSE(plain.contains("worst_case"));
  CHECK_FALSE(plain.contains("sanity"));
  CHECK(whole.at("ers") == plain.at("ers"));
  REQUIRE(whole.at("attacks").size() == plain.at("attacks").size());
  for (size_t a = 0; a < plain.at("attacks").size(); ++a) {
    CHECK(whole.at("attacks")[a].at("measures") == plain.at("attacks")[a].at("measures"));
  }
  const json& worst = whole.at("worst_case");
  CHECK(worst.at("restarts") == 1);
  REQUIRE(worst.at("attacks").size() == 9);
  for (size_t a = 0; a < 9; ++a) {
    const json& attack = worst.at("attacks")[a];
    INFO(attack.at("attack"));
    CHECK(attack.at("attack") == whole.at("attacks")[a].at("attack"));
    CHECK(attack.at("restarts_done") == 1);
    for (const auto& item : attack.at("measures").items()) {
      INFO(item.key());
      REQUIRE(item.value().at("single").size() == 1);
      REQUIRE(item.value().at("restarts").size() == 1);
      // The per-image values of restart 0 average to the attack's reported mean.
      const double reported =
          whole.at("attacks")[a].at("measures").at(item.key()).at("adversarial").get<double>();
      CHECK(mean(item.value().at("single")) == Approx(reported).margin(1e-9));
      CHECK(item.value().at("single_mean").get<double>() == Approx(reported).margin(1e-9));
    }
    const json& f = attack.at("robust_fraction");
    CHECK(f.at("worst").get<double>() <= f.at("single").get<double>());
    CHECK(f.at("worst").get<double>() <= f.at("restarts").get<double>());
  }
  // The worst case can only lower every normalized column, so ERS too.
  CHECK(worst.at("ers_worst").get<double>() <= whole.at("ers").get<double>() + 1e-9);
  const json& all = worst.at("robust_fraction");
  for (const char* family : {"rank", "embedding", "top-1"}) {
    INFO(family);
    CHECK(all.at("worst").get<double>() <= worst.at("families").at(family).at("worst"));
  }
  // The sanity checks: (a) not run here (--sanity-images 0; the next test runs it), (c) has no
  // black-box attack to compare with.
  const json& sanity = whole.at("sanity");
  CHECK(sanity.at("epsilon_one").at("checked") == false);
  CHECK(sanity.at("more_effort").at("checked") == true);
  CHECK(sanity.at("collapse").at("checked") == true);
  CHECK(sanity.at("collapse").at("passed") == true);
  CHECK(sanity.at("blackbox").at("checked") == false);

  // Resume: the first eight attacks kept, the eighth (GTM) with only restart 0 done; its restart
  // and the ninth attack run again.
  json partial = whole;
  partial["complete"] = false;
  partial.erase("ers");
  partial.erase("sanity");
  json kept = json::array(), kept_worst = json::array();
  for (size_t i = 0; i < 8; ++i) {
    kept.push_back(whole.at("attacks")[i]);
    kept_worst.push_back(whole.at("worst_case").at("attacks")[i]);
  }
  kept_worst[7]["restarts_done"] = 0;
  for (auto& item : kept_worst[7]["measures"].items()) {
    item.value()["restarts"] = json::array({nullptr});
  }
  partial["attacks"] = kept;
  partial["worst_case"]["attacks"] = kept_worst;
  write_json(dir.file("partial.json"), partial);
  REQUIRE(ers(checkpoint, dir.file("partial.json"),
              {"--resume", "--worst-case", "1", "--sanity-images", "0"}) == 0);
  const json resumed = read_json(dir.file("partial.json"));
  CHECK(resumed.at("complete") == true);
  CHECK(resumed.at("worst_case").at("attacks") == whole.at("worst_case").at("attacks"));
  CHECK(resumed.at("worst_case").at("robust_fraction") == all);
  CHECK(resumed.at("worst_case").at("ers_worst") == worst.at("ers_worst"));

  // A file written without --worst-case cannot give per-image values; one written with it is not
  // resumed without it (that would drop them), nor with another restart count.
  json without = partial;  // as a run without --worst-case writes it
  without.erase("worst_case");
  write_json(dir.file("without.json"), without);
  REQUIRE_THROWS_WITH(ers(checkpoint, dir.file("without.json"), {"--resume", "--worst-case", "1"}),
                      Catch::Contains("written without --worst-case"));
  write_json(dir.file("with.json"), partial);
  REQUIRE_THROWS_WITH(ers(checkpoint, dir.file("with.json"), {"--resume"}),
                      Catch::Contains("written with --worst-case"));
  REQUIRE_THROWS_WITH(ers(checkpoint, dir.file("with.json"), {"--resume", "--worst-case", "2"}),
                      Catch::Contains("this run has --worst-case 2"));
}

TEST_CASE("dml ers --worst-case: the eps = 1 sanity check runs each attack once at eps = 1",
          "[tools][ers][sanity]") {
  test::TempDir dir;
  REQUIRE(dml::train(tiny_training::tiny_config("triplet", dir.file("run"), 2),
                     dml::TrainOptions()) == 0);
  dml::Args args({"--checkpoint", dir.file("run/model.safetensors"), "--max-images", "2",
                  "--batch-size", "2", "--device", "cpu", "--root", tiny_training::data_root()});
  dml::AttackSetup setup = dml::setup_attack(dml::take_attack_options(args));
  dml::WorstCaseOptions options;
  options.restarts = 1;
  options.sanity_images = 2;
  dml::ErsWorstCase worst(options, 2);
  // Two of rob28's attacks (the whole profile is the test above), the second twice as a qccurve
  // column would be: the eps = 1 check attacks each label once.
  std::vector<attacks::AttackSpec> specs;
  for (const char* text :
       {"GTM:eps=0.30196:alpha=0.011764:pgditer=32", "ES:eps=0.30196:alpha=0.011764:pgditer=32",
        "ES:eps=0.1:alpha=0.011764:pgditer=32"}) {
    specs.push_back(attacks::parse_attack_spec(text));
  }
  worst.run_sanity(setup, specs);
  const json sanity = worst.sanity_json();
  const json& one = sanity.at("epsilon_one");
  CHECK(one.at("checked") == true);
  CHECK(one.at("images") == 2);
  REQUIRE(one.at("robust_fraction").size() == 2);
  // At eps = 1 a trained (smooth) model loses every top-1 to GTM and shifts every embedding by
  // more than 1: no image survives, and the check passes.
  CHECK(one.at("robust_fraction").at("GTM") == 0.0);
  CHECK(one.at("robust_fraction").at("ES") == 0.0);
  CHECK(one.at("passed") == true);
  CHECK(sanity.at("trusted") == true);
}

TEST_CASE("sanity check (d): a gallery of equal embeddings is flagged as collapsed",
          "[tools][ers][sanity]") {
  // 40 items of 4 classes in D = 4. Collapsed: every row (1, 1, 1, 1): one k-means cluster, so
  // NMI = 0, and all class means equal, so pi_ratio = 0 / 0 (NaN). Separated: class c's rows are
  // the unit vector e_c: k-means finds the classes (NMI = 1); within a class d = 0, so
  // pi_ratio = 0.
  std::vector<int64_t> labels;
  std::vector<double> collapsed, separated;
  for (int64_t i = 0; i < 40; ++i) {
    labels.push_back(i % 4);
    for (int64_t d = 0; d < 4; ++d) {
      collapsed.push_back(1.0);
      separated.push_back(d == i % 4 ? 1.0 : 0.0);
    }
  }
  const engine::Device cpu = engine::Device::cpu();
  double nmi = -1.0, ratio = -1.0;
  const attacks::SanityVerdict flagged = dml::check_gallery_not_collapsed(
      attacks::gallery_from_embeddings(engine::Tensor::from_vector(collapsed, {40, 4}), labels,
                                       losses::Metric::N, cpu),
      1, &nmi, &ratio);
  CHECK_FALSE(flagged.passed);
  CHECK(nmi == Approx(0.0).margin(1e-12));
  CHECK(std::isnan(ratio));
  const attacks::SanityVerdict fine = dml::check_gallery_not_collapsed(
      attacks::gallery_from_embeddings(engine::Tensor::from_vector(separated, {40, 4}), labels,
                                       losses::Metric::N, cpu),
      1, &nmi, &ratio);
  CHECK(fine.passed);
  CHECK(nmi == Approx(1.0));
  CHECK(ratio == Approx(0.0).margin(1e-3));
}
