// `dml report --robustness` (tools/dml/report_robustness.cpp): several models' hand-written `dml
// ers` results (rob28 ERS files, one with a "worst_case", and curve28 files) drawn into one SVG,
// checked against values and pixels worked out by hand from the documented layout; bad inputs
// give usage errors (exit 2) or runtime errors (exit 1) naming the file.
#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/common/check.h"
#include "tests/io/io_test_util.h"
#include "tests/tools/stderr_capture.h"
#include "tools/dml/args.h"
#include "tools/dml/commands.h"

using nlohmann::json;

namespace {

int report(std::vector<std::string> tokens) {
  dml::Args args(std::move(tokens));
  return dml::run_report(args);
}

void write_json(const std::string& path, const json& value) {
  std::ofstream out(path);
  out << value.dump(2);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

json header(const std::string& profile, const std::string& weights, int images) {
  return {{"checkpoint", "m.safetensors"},
          {"weights_fnv1a64", weights},
          {"profile", profile},
          {"metric", "N"},
          {"batch_size", 128},
          {"dataset", "fashion-mnist:test"},
          {"images", images},
          {"robrank_compat", false},
          {"seed", 0},
          {"complete", true}};
}

// A finished rob28 file. Raw columns chosen so that the normalized ones are 20 60 10 40 10 25 10
// 20 30 5 (CA+ 2z, CA- 100 - z, QA+ 2z, QA- 100 - z, TMA 100 (1 - z), ES:D 100 (2 - z) / 2, the
// rest z): ERS = 230 / 10 = 23.0.
json ers_file(const std::string& weights) {
  json j = header("rob28", weights, 10000);
  const std::vector<std::pair<const char*, double>> raw = {
      {"CA+", 10.0}, {"CA-", 40.0},  {"QA+", 5.0},  {"QA-", 60.0}, {"TMA", 0.9},
      {"ES:D", 1.5}, {"ES:R", 10.0}, {"LTM", 20.0}, {"GTM", 30.0}, {"GTT", 5.0}};
  for (const auto& [key, value] : raw) j[key] = value;
  j["ers"] = 23.0;
  j["attacks"] = json::array({{{"attack", "CA:pm=+:W=1:eps=0.30196:alpha=0.011764:pgditer=32"}}});
  return j;
}

// A curve28 file with four CA+ points: eps 0 -> 100, eps 7/255 -> 50 (32 steps); steps 1 -> 80,
// steps 128 -> 20 (at 77/255).
json curve_file(const std::string& weights) {
  json j = header("curve28", weights, 100);
  auto point = [](const char* sweep, int eps_255, int steps, double score) {
    return json{{"sweep", sweep},     {"column", "CA+"},    {"eps", eps_255 / 255.0},
                {"eps_255", eps_255}, {"alpha", 1 / 255.0}, {"alpha_255", 1},
                {"steps", steps},     {"spec", "CA:..."},   {"measure", "CA+:prank"},
                {"clean", 50.0},      {"raw", score / 2},   {"score", score}};
  };
  j["curve"] = json::array({point("eps", 0, 32, 100.0), point("eps", 7, 32, 50.0),
                            point("steps", 77, 1, 80.0), point("steps", 77, 128, 20.0)});
  j["attacks"] = json::array({{{"attack", "CA:pm=+:W=1:eps=0.000000:alpha=0.003922:pgditer=32"}}});
  return j;
}

std::vector<std::string> polyline_points(const std::string& svg, const std::string& title) {
  std::vector<std::string> out;
  const std::regex re("<polyline class=\"curve\"[^>]* points=\"([^\"]*)\"><title>" + title +
                      "</title>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

}  // namespace

TEST_CASE("dml report --robustness draws several models' ERS, worst case and curves",
          "[tools][report]") {
  test::TempDir dir;
  write_json(dir.file("vanilla-ers.json"), ers_file("aaaa"));
  write_json(dir.file("vanilla-curve.json"), curve_file("aaaa"));
  json act = ers_file("bbbb");
  // As `dml ers --worst-case 3` writes it (tools/dml/ers_worst_case.cpp), fractions in [0, 1].
  act["worst_case"] = {{"restarts", 3},
                       {"robust_fraction", {{"single", 0.5}, {"restarts", 0.45}, {"worst", 0.42}}},
                       {"ers_worst", 20.5}};
  write_json(dir.file("act-ers.json"), act);
  const std::string out = dir.file("robustness.svg");
  const std::string printed = test::output_of(1, dir.file("stdout.txt"), [&] {
    REQUIRE(
        report({"--robustness", "--input",
                "vanilla=" + dir.file("vanilla-ers.json") + "," + dir.file("vanilla-curve.json"),
                "--input", "act=" + dir.file("act-ers.json"), "--out", out}) == 0);
  });
  // One summary line per model: the worst case as its ERS, not the whole JSON object.
  CHECK(printed.find("vanilla          ERS 23.0, worst-case ERS not computed, 4 curve points") !=
        std::string::npos);
  CHECK(printed.find("act              ERS 23.0, worst-case ERS 20.5, 0 curve points") !=
        std::string::npos);
  const std::string svg = read_text(out);
  REQUIRE(svg.rfind("<svg", 0) == 0);
  // The caption: image counts and modes of each file.
  CHECK(svg.find("ERS rob28: 10000 images of fashion-mnist:test, metric N, eps 77/255, 32 steps "
                 "of 3/255, no random start, 1 run per attack, seed 0") != std::string::npos);
  CHECK(svg.find("worst case over 3 restarts") != std::string::npos);
  CHECK(svg.find("curves curve28: 100 images of fashion-mnist:test") != std::string::npos);
  CHECK(svg.find("curves: no curve28/curve224 file") != std::string::npos);  // act's
  // ERS bars: both models' ERS 23.0; the worst case: act's ERS 20.5 and robust 50 % / 42 %,
  // vanilla's "n/c".
  CHECK(svg.find("<title>vanilla ERS: 23.0</title>") != std::string::npos);
  CHECK(svg.find("<title>act ERS: 23.0</title>") != std::string::npos);
  CHECK(svg.find("<title>vanilla CA-: 60.0</title>") != std::string::npos);
  CHECK(svg.find("<title>act ERS worst: 20.5</title>") != std::string::npos);
  CHECK(svg.find("<title>act robust % 1 run: 50.0</title>") != std::string::npos);
  CHECK(svg.find("<title>act robust % worst: 42.0</title>") != std::string::npos);
  CHECK(svg.find(">n/c</text>") != std::string::npos);
  CHECK(svg.find("not computed") == std::string::npos);
  // Curves: 2 models -> caption 16 + 16 + 2 x 32 = 96 high, the ERS band at 136, the curves at
  // 466. The eps sweep's CA+ panel: plot (44, 466 + 30 + 26 = 522), 130 x 100, x 0..1, y 0..100:
  // eps 0 -> (44, 522); 7/255 -> (44 + 130 x 7/255 = 47.57, 572).
  const std::vector<std::string> ca = polyline_points(svg, "vanilla CA\\+");
  REQUIRE(ca.size() == 2);
  CHECK(ca[0] == "44.00,522.00 47.57,572.00");
  // The steps sweep's CA+ panel: plot (44, 496 + 340 + 30 + 26 = 892), x log2(steps) 0..7:
  // 1 step -> (44, 992 - 80 = 912); 128 -> (174, 972).
  CHECK(ca[1] == "44.00,912.00 174.00,972.00");
  CHECK(polyline_points(svg, "act CA\\+").empty());  // no curve file for act

  // Another image count: drawn, with a warning on stderr that the two do not compare.
  json small = ers_file("cccc");
  small["images"] = 100;
  write_json(dir.file("small-ers.json"), small);
  const std::string err = test::standard_error_of(dir.file("stderr.txt"), [&] {
    REQUIRE(report({"--robustness", "--input", "a=" + dir.file("act-ers.json"), "--input",
                    "b=" + dir.file("small-ers.json"), "--out", out}) == 0);
  });
  CHECK_THAT(err, Catch::Contains("the ERS results of 'b' (rob28, 100 images") &&
                      Catch::Contains("do not compare"));

  // One model without a worst case: the panel says so.
  REQUIRE(report({"--robustness", "--input", dir.file("vanilla-ers.json"), "--out", out}) == 0);
  const std::string alone = read_text(out);
  CHECK(alone.find(">not computed</text>") != std::string::npos);
  CHECK(alone.find("<title>vanilla-ers ERS: 23.0</title>") != std::string::npos);  // stem label
}

TEST_CASE("dml report --robustness: bad inputs are named, usage errors before any file is read",
          "[tools][report]") {
  test::TempDir dir;
  write_json(dir.file("ers.json"), ers_file("aaaa"));
  const std::string out = dir.file("r.svg");
  // Usage errors (exit 2).
  CHECK_THROWS_AS(report({"--robustness", "--out", out}), dml::UsageError);
  CHECK_THROWS_AS(report({"--robustness", "--input", "=" + dir.file("ers.json"), "--out", out}),
                  dml::UsageError);
  CHECK_THROWS_AS(report({"--robustness", "--input", "a=", "--out", out}), dml::UsageError);
  CHECK_THROWS_AS(report({"--robustness", "--input", "a=" + dir.file("ers.json"), "--input",
                          "a=" + dir.file("ers.json"), "--out", out}),
                  dml::UsageError);
  CHECK_THROWS_AS(report({"--robustness", "--input", dir.file("missing.json"), "--out", out}),
                  dml::UsageError);
  CHECK_THROWS_AS(report({"--robustness", "--input", dir.file("ers.json")}), dml::UsageError);
  // Runtime errors (exit 1), naming the file.
  std::ofstream(dir.file("text.json")) << "not json";
  CHECK_THROWS_WITH(report({"--robustness", "--input", dir.file("text.json"), "--out", out}),
                    Catch::Contains(dir.file("text.json")) && Catch::Contains("not a JSON object"));
  json qc = ers_file("aaaa");
  qc["profile"] = "qccurve28";
  write_json(dir.file("qc.json"), qc);
  CHECK_THROWS_WITH(report({"--robustness", "--input", dir.file("qc.json"), "--out", out}),
                    Catch::Contains("qc.json: profile 'qccurve28' is neither"));
  json unfinished = ers_file("aaaa");
  unfinished.erase("GTT");
  write_json(dir.file("unfinished.json"), unfinished);
  CHECK_THROWS_WITH(report({"--robustness", "--input", dir.file("unfinished.json"), "--out", out}),
                    Catch::Contains("unfinished.json: no number \"GTT\""));
  write_json(dir.file("other-curve.json"), curve_file("cccc"));
  CHECK_THROWS_WITH(
      report({"--robustness", "--input",
              "m=" + dir.file("ers.json") + "," + dir.file("other-curve.json"), "--out", out}),
      Catch::Contains("two models under one label"));
  json no_curve = curve_file("aaaa");
  no_curve.erase("curve");
  write_json(dir.file("no-curve.json"), no_curve);
  CHECK_THROWS_WITH(report({"--robustness", "--input", dir.file("no-curve.json"), "--out", out}),
                    Catch::Contains("no-curve.json: no \"curve\" array"));
  CHECK_THROWS_AS(report({"--robustness", "--input", dir.file("no-curve.json"), "--out", out}),
                  engine::Error);
}
