// The readers of result files (tools/dml/result_json.h) on mistyped values that reached
// nlohmann's exceptions or undefined behaviour before they were checked: each now fails with
// engine::Error or a usage error naming the file, or reads the value as absent where the command
// only prints it (the inputs tests/fuzz/fuzz_result_json.cpp exercises).
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "attacks/worst_case.h"
#include "kernels/common/check.h"
#include "tools/dml/args.h"
#include "tools/dml/result_json.h"

using Catch::Contains;
using nlohmann::json;

namespace {

dml::ErsResumeKey resume_key(int64_t restarts) {
  dml::ErsResumeKey key;
  key.weights_fnv1a64 = "00000000deadbeef";
  key.profile = "rob28";
  key.metric = "N";
  key.dataset = "fashion-mnist:test";
  key.random_streams = "one per attack";
  key.precision = "fp32";
  key.batch_size = 2;
  key.images = 2;
  key.worst_case_restarts = restarts;
  return key;
}

json ers_header() {
  return {{"weights_fnv1a64", "00000000deadbeef"},
          {"profile", "rob28"},
          {"metric", "N"},
          {"batch_size", 2},
          {"dataset", "fashion-mnist:test"},
          {"robrank_compat", false},
          {"seed", 0},
          {"random_streams", "one per attack"},
          {"precision", "fp32"},
          {"bn_branch", 0}};
}

json attack_result() {
  return {{"attack", "CA:pm=+:W=1:eps=0.30196:alpha=0.011764:pgditer=32"},
          {"images", 2},
          {"seconds", 0.5},
          {"measures", {{"CA+:prank", {{"clean", 49.6}, {"adversarial", 1.1}}}}},
          {"max_delta", 0.3},
          {"nan_count", 0},
          {"pixel_min", 0.0},
          {"pixel_max", 1.0}};
}

json ers_columns() {
  return {{"CA+", 1.0},  {"CA-", 90.0}, {"QA+", 1.0}, {"QA-", 90.0}, {"TMA", 0.9},
          {"ES:D", 1.5}, {"ES:R", 0.2}, {"LTM", 0.7}, {"GTM", 7.8},  {"GTT", 0.0}};
}

}  // namespace

TEST_CASE("dml ers --resume: a mistyped worst case or count is refused, naming the file",
          "[tools][ers][resume]") {
  json file = ers_header();
  file["attacks"] = json::array({attack_result()});
  file["checkpoint"] = 5;  // not a path: the resume goes on, the path counts as not recorded
  const dml::ErsResume resume =
      dml::read_ers_resume(file.dump(), "ers.json", resume_key(0), nullptr);
  CHECK(resume.finished.size() == 1);
  CHECK_FALSE(resume.checkpoint.has_value());

  // "worst_case" not an object: was nlohmann's type_error from .value().
  file["worst_case"] = 5;
  CHECK_THROWS_AS(dml::read_ers_resume(file.dump(), "ers.json", resume_key(0), nullptr),
                  dml::UsageError);
  attacks::WorstCaseTable table(2);
  CHECK_THROWS_WITH(dml::read_ers_resume(file.dump(), "ers.json", resume_key(1), &table),
                    Contains("ers.json was written with --worst-case null"));

  // A count of 1e300: nlohmann's get<int64_t>() converts it, undefined behaviour.
  file["worst_case"] = {
      {"restarts", 1},
      {"attacks",
       {{{"attack", "CA:pm=+:W=1:eps=0.30196:alpha=0.011764:pgditer=32"},
         {"restarts_done", 1e300},
         {"measures", {{"CA+:prank", {{"single", {1.0, 2.0}}, {"restarts", {0.5, 0.5}}}}}}}}}};
  CHECK_THROWS_WITH(dml::read_ers_resume(file.dump(), "ers.json", resume_key(1), &table),
                    Contains("ers.json") && Contains("\"restarts_done\" 1e+300 is not an integer"));
  file.erase("worst_case");
  file["attacks"][0]["images"] = 1e300;
  CHECK_THROWS_WITH(dml::read_ers_resume(file.dump(), "ers.json", resume_key(0), nullptr),
                    Contains("ers.json") && Contains("\"images\" is not an integer"));
}

TEST_CASE("dml aggregate and report --cost-ers: mistyped keys are refused, naming the file",
          "[tools][aggregate]") {
  json ers = ers_columns();
  ers["complete"] = "yes";  // was nlohmann's type_error from .value("complete", false)
  CHECK_THROWS_WITH(dml::parse_seed_result(R"({"recall@1": 0.5, "map": 0.4, "nmi": 0.6})",
                                           "metrics.json", ers.dump(), "ers.json"),
                    Contains("ers.json: the ERS is not complete"));

  const json columns = {{"passes/batch", {{"mean", 3.0}}}, {"ERS", {{"mean", 20.0}}}};
  // "seeds": 1e300 was a float-to-integer conversion out of range; the others type_errors.
  for (const json& row : {json{{"name", "a"}, {"seeds", 1e300}, {"columns", columns}},
                          json{{"name", "a"}, {"seeds", -1}, {"columns", columns}},
                          json{{"name", 5}, {"columns", columns}}, json("a row")}) {
    CHECK_THROWS_AS(dml::parse_cost_series("x", json{{"rows", {row}}}.dump(), "agg.json"),
                    engine::Error);
  }
  const dml::CostSeries series = dml::parse_cost_series(
      "x", json{{"rows", {{{"seeds", 3}, {"columns", columns}}}}}.dump(), "agg.json");
  REQUIRE(series.points.size() == 1);
  CHECK(series.points[0].name == "?");
  CHECK(series.points[0].seeds == 3);
}

TEST_CASE("dml report --robustness: values it only describes may have any type",
          "[tools][report]") {
  json ers = ers_header();
  const json columns = ers_columns();
  for (const auto& item : columns.items()) ers[item.key()] = item.value();
  ers["robrank_compat"] = "yes";  // the caption's flags: were type_errors from .value()
  ers["complete"] = 1;
  ers["worst_case"] = json::array();  // no "ers_worst": the summary line threw
  dml::RobustnessModel model;
  model.label = "m";
  dml::add_robustness_file(model, ers.dump(), "ers.json");
  CHECK_FALSE(model.ers_header.robrank_compat_on);
  CHECK_FALSE(model.ers_header.complete);
  CHECK(model.has_worst_case);
  CHECK(std::isnan(model.worst_case[0]));

  json curve = ers_header();
  curve["profile"] = "curve28";
  curve["curve"] = {
      {{"sweep", "steps"}, {"column", "CA+"}, {"eps", "x"}, {"steps", 1}, {"score", 5}}};
  dml::add_robustness_file(model, curve.dump(), "curve.json");  // eps: drawn as the heading's
  CHECK(model.steps_eps == 0.0);

  ers["attacks"] = {{{"attack", 5}}};  // the caption's attack mode: was a type_error
  dml::RobustnessModel other;
  CHECK_THROWS_WITH(dml::add_robustness_file(other, ers.dump(), "ers.json"),
                    Contains("ers.json: the first attack's \"attack\" 5 is not an attack spec"));
}
