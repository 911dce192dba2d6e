// `dml ers --profile table1-28` (attacks/profiles.h, tools/dml/table1_results.h): the attack cells
// of Zhou et al. TPAMI Tab. 1. The arrangement is checked on hand-made attack summaries (values
// chosen so that a wrong row, column or measure shows), and one short real run checks that the
// profile's 32 attacks run and land in the table as their own records say.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attacks/attack.h"
#include "attacks/profiles.h"
#include "tests/io/io_test_util.h"
#include "tests/tools/ers_test_util.h"
#include "tests/tools/tiny_training.h"
#include "tools/dml/attack_setup.h"
#include "tools/dml/commands.h"
#include "tools/dml/table1_results.h"
#include "tools/dml/trainer.h"

using nlohmann::json;

namespace {

// A finished attack of the grid with hand-set means: clean 50, adversarial `adversarial`, and for
// SP-QA the references' percentile `gt`.
dml::AttackSummary summary(const std::string& spec_text, double adversarial, double gt = 0.0) {
  const attacks::AttackSpec spec = attacks::parse_attack_spec(spec_text);
  dml::AttackSummary s;
  s.spec = attacks::attack_spec_string(spec);
  s.label = attacks::attack_label(spec);
  s.names = {s.label + ":prank"};
  s.clean = {50.0};
  s.adversarial = {adversarial};
  if (spec.kind == attacks::AttackKind::SPQA) {
    s.names.push_back(s.label + ":GTprank");
    s.clean.push_back(0.5);
    s.adversarial.push_back(gt);
  }
  return s;
}

}  // namespace

TEST_CASE("table1-28: Tab. 1's 32 attacks, w and m = 1, 2, 5, 10 at 8/255 and 77/255",
          "[attacks]") {
  const std::vector<std::string> specs = attacks::profile_specs("table1-28");
  REQUIRE(specs.size() == 32);
  CHECK(attacks::is_table1_profile("table1-28"));
  CHECK_FALSE(attacks::is_ers_profile("table1-28"));
  // The paper's step (§6.1.3): max(1, round(8 / 25)) = 1 and round(77 / 25) = 3, in 1/255.
  CHECK(specs[0] == "CA:pm=+:W=1:eps=0.03137:alpha=0.00392:pgditer=32");
  CHECK(specs[3] == "SPQA:pm=-:M=1:eps=0.03137:alpha=0.00392:pgditer=32");
  CHECK(specs[5] == "CA:pm=-:W=2:eps=0.03137:alpha=0.00392:pgditer=32");
  CHECK(specs[14] == "SPQA:pm=+:M=10:eps=0.03137:alpha=0.00392:pgditer=32");
  CHECK(specs[16] == "CA:pm=+:W=1:eps=0.30196:alpha=0.01176:pgditer=32");
  CHECK(specs[31] == "SPQA:pm=-:M=10:eps=0.30196:alpha=0.01176:pgditer=32");
  for (const std::string& text : specs) CHECK_NOTHROW(attacks::parse_attack_spec(text));
}

TEST_CASE("table1-28: the attacks arranged as Tab. 1, R^_GT the worst reference percentile over m",
          "[tools][ers]") {
  const std::string e8 = ":eps=0.03137:alpha=0.00392:pgditer=32";
  const std::string e77 = ":eps=0.30196:alpha=0.01176:pgditer=32";
  // Out of the profile's order on purpose; 77/255's SP-QA+ lacks m = 5; an ERS attack (TMA) and a
  // CA with a w outside the grid are not Tab. 1's and are left out.
  const std::vector<dml::AttackSummary> finished = {summary("SPQA:pm=+:M=2" + e8, 12.0, 0.4),
                                                    summary("CA:pm=-:W=10" + e8, 94.0),
                                                    summary("CA:pm=+:W=1" + e8, 31.0),
                                                    summary("SPQA:pm=+:M=1" + e8, 11.0, 0.3),
                                                    summary("SPQA:pm=+:M=10" + e8, 14.0, 0.2),
                                                    summary("SPQA:pm=+:M=5" + e8, 13.0, 0.9),
                                                    summary("CA:pm=+:W=5" + e77, 25.0),
                                                    summary("SPQA:pm=+:M=1" + e77, 41.0, 0.7),
                                                    summary("TMA" + e8, 0.5),
                                                    summary("CA:pm=+:W=3" + e8, 99.0)};
  const json table = dml::table1_results_json(finished);
  REQUIRE(table.size() == 5);
  // 8/255: CA+, CA-, SP-QA+ in the paper's row order; then 77/255.
  CHECK(table[0].at("eps_255") == 8);
  CHECK(table[0].at("attack") == "CA+");
  CHECK(table[0].at("counts") == json({1, 2, 5, 10}));
  CHECK(table[0].at("adversarial") == json({31.0, nullptr, nullptr, nullptr}));
  CHECK(table[0].at("clean") == json({50.0, nullptr, nullptr, nullptr}));
  CHECK_FALSE(table[0].contains("gt_worst"));
  CHECK(table[1].at("attack") == "CA-");
  CHECK(table[1].at("adversarial") == json({nullptr, nullptr, nullptr, 94.0}));
  CHECK(table[2].at("attack") == "SP-QA+");
  CHECK(table[2].at("adversarial") == json({11.0, 12.0, 13.0, 14.0}));
  CHECK(table[2].at("gt_worst") == 0.9);  // m = 5's 0.9, not the last m's 0.2
  CHECK(table[3].at("eps_255") == 77);
  CHECK(table[3].at("attack") == "CA+");
  CHECK(table[3].at("adversarial") == json({nullptr, nullptr, 25.0, nullptr}));
  CHECK(table[4].at("attack") == "SP-QA+");
  CHECK(table[4].at("adversarial") == json({41.0, nullptr, nullptr, nullptr}));
  CHECK(table[4].at("gt_worst").is_null());  // three m not run yet
}

TEST_CASE("dml ers --profile table1-28 runs the 32 attacks into its table", "[tools][ers]") {
  test::TempDir dir;
  REQUIRE(dml::train(tiny_training::tiny_config("triplet", dir.file("run"), 1),
                     dml::TrainOptions()) == 0);
  const std::string checkpoint = dir.file("run/model.safetensors");
  const std::string out = dir.file("table1.json");
  // SP-QA- keeps its references among the top 1 % of the gallery, which the tiny data's 30 test
  // images do not have: the run stops at the first SP-QA-, having written CA+, CA- and SP-QA+.
  CHECK_THROWS_WITH(ers_test::run_tiny_ers(checkpoint, "table1-28", 2, out, {}),
                    Catch::Contains("SPQA-: the gallery is too small"));
  json partial = ers_test::read_json(out);
  REQUIRE(partial.at("attacks").size() == 3);
  // The eight SP-QA- records by hand (from SP-QA+'s record, renamed): adversarial 60 + 10 e + c
  // and reference percentile 1 + c + 4 e for eps block e and count column c.
  const json template_record = partial.at("attacks")[2];
  const std::vector<std::string> specs = attacks::profile_specs("table1-28");
  for (size_t i = 3; i < specs.size(); i += 4) {
    const double e = static_cast<double>(i / 16), c = static_cast<double>(i / 4 % 4);
    json record = template_record;
    attacks::AttackSpec spec = attacks::parse_attack_spec(specs[i]);
    dml::complete_spec(spec, "mnist");  // as dml ers does: SP-QA's zeta for the data set
    record["attack"] = attacks::attack_spec_string(spec);
    record["measures"] = json::object();
    record["measures"]["SPQA-:prank"] = {{"clean", 1.0}, {"adversarial", 60.0 + 10.0 * e + c}};
    record["measures"]["SPQA-:GTprank"] = {{"clean", 0.5}, {"adversarial", 1.0 + c + 4.0 * e}};
    partial["attacks"].push_back(record);
  }
  ers_test::write_json(out, partial);
  REQUIRE(ers_test::run_tiny_ers(checkpoint, "table1-28", 2, out, {"--resume"}) == 0);

  const json result = ers_test::read_json(out);
  CHECK(result.at("complete") == true);
  const json& records = result.at("attacks");
  REQUIRE(records.size() == 32);  // in the profile's order
  const json& table = result.at("table1");
  REQUIRE(table.size() == 8);  // 2 eps x (CA+, CA-, SP-QA+, SP-QA-)
  // Record i is spec i: eps block i / 16, count column i / 4 % 4, row i % 4 of the block.
  for (size_t i = 0; i < records.size(); ++i) {
    INFO(records[i].at("attack"));
    const json& row = table[i / 16 * 4 + i % 4];
    const std::string label =
        attacks::attack_label(attacks::parse_attack_spec(records[i].at("attack")));
    CHECK(row.at("adversarial")[i / 4 % 4] ==
          records[i].at("measures").at(label + ":prank").at("adversarial"));
  }
  CHECK(table[3].at("attack") == "SP-QA-");
  CHECK(table[3].at("adversarial") == json({60.0, 61.0, 62.0, 63.0}));
  CHECK(table[3].at("gt_worst") == 4.0);
  CHECK(table[7].at("adversarial") == json({70.0, 71.0, 72.0, 73.0}));
  CHECK(table[7].at("gt_worst") == 8.0);
  for (const size_t r : {2, 6}) {  // SP-QA+, run for real: R^_GT the largest of its four
    double worst = 0.0;
    for (size_t c = 0; c < 4; ++c) {
      const json& measures = records[r / 4 * 16 + c * 4 + 2].at("measures");
      worst = std::max(worst, measures.at("SPQA+:GTprank").at("adversarial").get<double>());
    }
    CHECK(table[r].at("gt_worst").get<double>() == worst);
  }
}
