// `dml ers --resume` (tools/dml/ers.cpp): an interrupted run's finished attacks are kept from the
// --out file and only the rest run, so the result equals an uninterrupted run's; a file written
// for other settings is refused. On a tiny C2F2 trained on the generated data of tiny_training.h,
// attacking 6 test images (8 steps of rob28 would be the same code, only slower).
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

int ers(const std::string& checkpoint, const std::string& out, std::vector<std::string> extra) {
  return ers_test::run_tiny_ers(checkpoint, "rob28", 6, out, extra);
}

}  // namespace

TEST_CASE("dml ers --resume keeps the finished attacks and runs the rest", "[tools][ers]") {
  test::TempDir dir;
  REQUIRE(dml::train(tiny_training::tiny_config("triplet", dir.file("run"), 2),
                     dml::TrainOptions()) == 0);
  const std::string checkpoint = dir.file("run/model.safetensors");
  REQUIRE(ers(checkpoint, dir.file("whole.json"), {}) == 0);
  const json whole = read_json(dir.file("whole.json"));
  REQUIRE(whole.at("complete") == true);
  REQUIRE(whole.at("attacks").size() == 9);  // rob28: nine attacks give the ten columns

  // An "interrupted" file: the first four attacks, one of them altered so the test can tell a
  // kept attack from a re-run one (CA+ is the first: its adversarial rank becomes 12.5 %).
  json partial = whole;
  partial["complete"] = false;
  partial.erase("ers");
  json kept = json::array();
  for (size_t i = 0; i < 4; ++i) kept.push_back(whole.at("attacks")[i]);
  REQUIRE(kept[0].at("attack").get<std::string>().rfind("CA:pm=+", 0) == 0);
  kept[0]["measures"]["CA+:prank"]["adversarial"] = 12.5;
  partial["attacks"] = kept;
  write_json(dir.file("partial.json"), partial);

  REQUIRE(ers(checkpoint, dir.file("partial.json"), {"--resume"}) == 0);
  const json resumed = read_json(dir.file("partial.json"));
  CHECK(resumed.at("complete") == true);
  REQUIRE(resumed.at("attacks").size() == 9);
  for (size_t i = 1; i < 9; ++i) {  // attacks 1..3 kept, 4..8 re-run: all equal the whole run's
    INFO(i);
    CHECK(resumed.at("attacks")[i].at("measures") == whole.at("attacks")[i].at("measures"));
  }
  CHECK(resumed.at("CA+").get<double>() == 12.5);  // kept, not recomputed
  for (const char* column : {"CA-", "QA+", "QA-", "TMA", "ES:D", "ES:R", "LTM", "GTM", "GTT"}) {
    INFO(column);
    CHECK(resumed.at(column) == whole.at(column));
  }
  // ERS = mean of ten normalized columns; CA+ enters as 2 x CA+.
  const double expected =
      whole.at("ers").get<double>() + (2 * 12.5 - 2 * whole.at("CA+").get<double>()) / 10.0;
  CHECK(resumed.at("ers").get<double>() == Approx(expected).epsilon(1e-12));
}

TEST_CASE("dml ers --resume refuses a file written for other settings", "[tools][ers]") {
  test::TempDir dir;
  REQUIRE(dml::train(tiny_training::tiny_config("triplet", dir.file("run"), 1),
                     dml::TrainOptions()) == 0);
  const std::string checkpoint = dir.file("run/model.safetensors");
  REQUIRE(ers(checkpoint, dir.file("whole.json"), {}) == 0);
  // The file of a run killed after its last attack, before it wrote its ERS: a resume has no
  // attack left to run, so each accepted resume below costs only the model's loading.
  json partial = read_json(dir.file("whole.json"));
  partial["complete"] = false;
  partial.erase("ers");
  // The untouched file resumes: the refusals below are the changed key's doing.
  write_json(dir.file("same.json"), partial);
  REQUIRE(ers(checkpoint, dir.file("same.json"), {"--resume"}) == 0);
  CHECK(read_json(dir.file("same.json")).at("ers") == read_json(dir.file("whole.json")).at("ers"));
  // Each key changed in the file, the run's own settings as before (ers() above).
  const std::vector<std::pair<const char*, json>> changes = {
      {"seed", 3},
      {"robrank_compat", true},
      {"weights_fnv1a64", "0123456789abcdef"},  // another model's results at the same path
      {"metric", "E"},                          // written by a run with --metric E
      {"batch_size", 3},                        // the selection draws go batch by batch
      {"precision", "tf32"},                    // a run with --precision tf32
      {"bn_branch", 1},                         // a run through another BN branch
  };
  for (const auto& [key, stored] : changes) {
    INFO(key);
    json changed = partial;
    changed[key] = stored;
    const std::string file = dir.file(std::string(key) + ".json");
    write_json(file, changed);
    REQUIRE_THROWS_WITH(ers(checkpoint, file, {"--resume"}),
                        Catch::Contains(std::string("written with ") + key + " " + stored.dump()) &&
                            Catch::Contains(file));
  }
  // This run's precision and branch are recorded; a file from before they were (fp32 and branch 0
  // were the only choices then) resumes.
  CHECK(partial.at("precision") == "fp32");
  CHECK(partial.at("trained_precision") == "fp32");
  CHECK(partial.at("bn_branch") == 0);
  json before_precision = partial;
  for (const char* key : {"precision", "trained_precision", "bn_branch"})
    before_precision.erase(key);
  write_json(dir.file("before_precision.json"), before_precision);
  REQUIRE(ers(checkpoint, dir.file("before_precision.json"), {"--resume"}) == 0);
  // A file from before each attack had its own random stream (attacks/attack.h).
  json old_streams = partial;
  old_streams.erase("random_streams");
  write_json(dir.file("old_streams.json"), old_streams);
  REQUIRE_THROWS_WITH(ers(checkpoint, dir.file("old_streams.json"), {"--resume"}),
                      Catch::Contains("written with random_streams (none)"));
  dml::Args no_out({"--checkpoint", checkpoint, "--profile", "rob28", "--root",
                    tiny_training::data_root(), "--resume"});
  REQUIRE_THROWS_WITH(dml::run_ers(no_out), Catch::Contains("--resume needs --out"));
}
