// `dml ers --profile curve28` (attacks/curve_profiles.h, tools/dml/curve_results.h): its "curve"
// section and --resume. The whole profile is 180 attacks, far too slow for a test, so the test
// writes an "interrupted" file whose first 178 attacks carry hand-set scores, resumes it (only the
// last two attacks, GTM and GTT at 128 steps, run on 2 images of tiny_training.h's data), and
// checks every curve entry: the hand-set ones against values worked by hand from metrics/ers.h's
// table, the two that ran against their own attack records.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attacks/attack.h"
#include "attacks/profiles.h"
#include "tests/io/io_test_util.h"
#include "tests/tools/ers_test_util.h"
#include "tests/tools/tiny_training.h"
#include "tools/dml/args.h"
#include "tools/dml/commands.h"
#include "tools/dml/trainer.h"

using nlohmann::json;

namespace {

using ers_test::read_json;
using ers_test::write_json;

int ers(const std::string& checkpoint, const std::string& profile, const std::string& out,
        std::vector<std::string> extra) {
  return ers_test::run_tiny_ers(checkpoint, profile, 2, out, extra);
}

// The hand-set adversarial value of each ERS measure and its normalized score (metrics/ers.h):
// CA+ 2z, CA- 100 - z, QA+ 2z, QA- 100 - z, TMA 100 (1 - z), ES:D 100 (2 - z) / 2, the rest z.
struct HandValue {
  double raw, score;
};
const std::map<std::string, HandValue> kHand = {
    {"CA+:prank", {20.0, 40.0}},   {"CA-:prank", {30.0, 70.0}},  {"QA+:prank", {10.0, 20.0}},
    {"QA-:prank", {45.0, 55.0}},   {"TMA:cosine", {0.25, 75.0}}, {"ES:D", {0.5, 75.0}},
    {"ES:R", {60.0, 60.0}},        {"LTM:r@1", {33.0, 33.0}},    {"GTM:r@1", {12.5, 12.5}},
    {"GTT:retain@4", {80.0, 80.0}}};

}  // namespace

TEST_CASE("dml ers --profile curve28: the curve's entries, kept and resumed", "[tools][ers]") {
  test::TempDir dir;
  REQUIRE(dml::train(tiny_training::tiny_config("triplet", dir.file("run"), 1),
                     dml::TrainOptions()) == 0);
  const std::string checkpoint = dir.file("run/model.safetensors");
  // A rob28 run gives the file's header (weights hash, dataset, ...) and one attack record per
  // attack kind, whose measure names the hand-set records copy.
  REQUIRE(ers(checkpoint, "rob28", dir.file("rob28.json"), {}) == 0);
  const json rob28 = read_json(dir.file("rob28.json"));
  std::map<std::string, json> template_of;  // attack label -> its rob28 record
  for (const json& record : rob28.at("attacks")) {
    const attacks::AttackSpec spec = attacks::parse_attack_spec(record.at("attack"));
    template_of[attacks::attack_label(spec)] = record;
  }

  const std::vector<std::string> specs = attacks::profile_specs("curve28");
  REQUIRE(specs.size() == 180);
  json partial = rob28;
  for (const char* key :
       {"CA+", "CA-", "QA+", "QA-", "TMA", "ES:D", "ES:R", "LTM", "GTM", "GTT", "ers"}) {
    partial.erase(key);
  }
  partial["profile"] = "curve28";
  partial["complete"] = false;
  partial["attacks"] = json::array();
  for (size_t i = 0; i + 2 < specs.size(); ++i) {
    const attacks::AttackSpec spec = attacks::parse_attack_spec(specs[i]);
    json record = template_of.at(attacks::attack_label(spec));
    record["attack"] = attacks::attack_spec_string(spec);
    for (auto& [name, measure] : record.at("measures").items()) {
      if (kHand.count(name)) measure["adversarial"] = kHand.at(name).raw;
    }
    partial["attacks"].push_back(record);
  }
  write_json(dir.file("curve.json"), partial);

  REQUIRE(ers(checkpoint, "curve28", dir.file("curve.json"), {"--resume"}) == 0);
  const json result = read_json(dir.file("curve.json"));
  CHECK(result.at("complete") == true);
  CHECK_FALSE(result.contains("ers"));
  REQUIRE(result.at("attacks").size() == 180);
  const json& curve = result.at("curve");
  // 16 budgets + 5 step counts, nine attacks each, ES giving two columns: 21 x 10 entries.
  REQUIRE(curve.size() == 210);
  const json& gtm_run = result.at("attacks")[178].at("measures").at("GTM:r@1");
  const json& gtt_run = result.at("attacks")[179].at("measures").at("GTT:retain@4");
  int hand_entries = 0, run_entries = 0;
  for (const json& entry : curve) {
    INFO(entry.dump());
    const std::string measure = entry.at("measure");
    const bool ran = entry.at("sweep") == "steps" && entry.at("steps") == 128 &&
                     (measure == "GTM:r@1" || measure == "GTT:retain@4");
    if (ran) {
      const json& run = measure == "GTM:r@1" ? gtm_run : gtt_run;
      CHECK(entry.at("raw") == run.at("adversarial"));
      CHECK(entry.at("clean") == run.at("clean"));
      CHECK(entry.at("score") == run.at("adversarial"));  // recall and retain: the score is z
      ++run_entries;
    } else {
      CHECK(entry.at("raw").get<double>() == kHand.at(measure).raw);
      CHECK(entry.at("score").get<double>() == Approx(kHand.at(measure).score).epsilon(1e-12));
      ++hand_entries;
    }
    CHECK(entry.at("eps").get<double>() == Approx(entry.at("eps_255").get<int>() / 255.0));
    CHECK(entry.at("alpha").get<double>() == Approx(entry.at("alpha_255").get<int>() / 255.0));
  }
  CHECK(run_entries == 2);
  CHECK(hand_entries == 208);
  // Spot checks of the grid (attacks/curve_profiles.h): the first entry, the ES pair at
  // 204/255 and the eta = 8 point of QA-.
  CHECK(curve[0].at("column") == "CA+");
  CHECK(curve[0].at("eps_255") == 0);
  CHECK(curve[0].at("alpha_255") == 1);
  CHECK(curve[0].at("steps") == 32);
  const json& es_d = curve[14 * 10 + 5];
  CHECK(es_d.at("column") == "ES:D");
  CHECK(es_d.at("eps_255") == 204);
  CHECK(es_d.at("alpha_255") == 8);
  CHECK(curve[14 * 10 + 6].at("column") == "ES:R");
  const json& qa_minus_8 = curve[(16 + 1) * 10 + 3];
  CHECK(qa_minus_8.at("sweep") == "steps");
  CHECK(qa_minus_8.at("column") == "QA-");
  CHECK(qa_minus_8.at("steps") == 8);
  CHECK(qa_minus_8.at("eps_255") == 77);
  CHECK(qa_minus_8.at("alpha_255") == 12);
  // (77/255, 32 steps) is one attack in both sweeps: the same spec and raw score twice.
  const json& eps_77 = curve[11 * 10 + 0];
  const json& steps_32 = curve[(16 + 2) * 10 + 0];
  CHECK(eps_77.at("spec") == steps_32.at("spec"));
  CHECK(steps_32.at("steps") == 32);
  CHECK(eps_77.at("eps_255") == 77);
}
