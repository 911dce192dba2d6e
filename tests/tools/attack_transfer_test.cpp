// `dml attack` in transfer (--source-checkpoint) and black-box (nes=N) mode
// (tools/dml/attack_blackbox.cpp): a transfer from a model onto itself reproduces the white-box
// attack, one from another model gives another valid result measured on the target, NES reports
// its queries, and a missing source checkpoint is a usage error (exit code 2, README "Exit
// codes"). On tiny C2F2 models trained on the generated data of tiny_training.h.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/io/io_test_util.h"
#include "tests/tools/tiny_training.h"
#include "tools/dml/args.h"
#include "tools/dml/commands.h"
#include "tools/dml/trainer.h"

namespace {

// Runs `dml attack --json ...` and returns the JSON it printed.
nlohmann::json attack_json(const test::TempDir& dir, std::vector<std::string> tokens) {
  tokens.insert(tokens.end(), {"--device", "cpu", "--root", tiny_training::data_root(),
                               "--max-images", "4", "--batch-size", "4", "--json"});
  const std::string path = dir.file("stdout.json");
  std::fflush(stdout);
  const int saved = ::dup(1);
  std::FILE* file = std::fopen(path.c_str(), "w");
  ::dup2(::fileno(file), 1);
  dml::Args args(tokens);
  const int code = dml::run_attack_command(args);
  std::fflush(stdout);
  ::dup2(saved, 1);
  ::close(saved);
  std::fclose(file);
  REQUIRE(code == 0);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

double adversarial(const nlohmann::json& j, const std::string& measure) {
  return j.at("measures").at(measure).at("adversarial").get<double>();
}

}  // namespace

TEST_CASE("dml attack --source-checkpoint: transfer from itself is the white-box attack",
          "[tools][attack][transfer]") {
  test::TempDir dir;
  REQUIRE(dml::train(tiny_training::tiny_config("triplet", dir.file("a"), 2),
                     dml::TrainOptions()) == 0);
  REQUIRE(dml::train(tiny_training::tiny_config("triplet", dir.file("b"), 2, {{"seed", 6}}),
                     dml::TrainOptions()) == 0);
  const std::string a = dir.file("a/model.safetensors");
  const std::string b = dir.file("b/model.safetensors");
  const std::string spec = "QA:pm=+:M=1:eps=0.1:alpha=0.02:pgditer=4";

  const nlohmann::json white = attack_json(dir, {"--checkpoint", b, "--attack", spec});
  const nlohmann::json self =
      attack_json(dir, {"--checkpoint", b, "--source-checkpoint", b, "--attack", spec});
  CHECK(self.at("mode") == "transfer");
  CHECK(adversarial(self, "QA+:prank") == adversarial(white, "QA+:prank"));
  CHECK(self.at("measures") == white.at("measures"));
  CHECK(self.at("whitebox").at("measures").at("QA+:prank").at("adversarial") ==
        adversarial(white, "QA+:prank"));
  CHECK(self.at("gradient_masking_suspected") == false);

  const nlohmann::json transfer =
      attack_json(dir, {"--checkpoint", b, "--source-checkpoint", a, "--attack", spec});
  // B's selection and clean measure, A's perturbation, measured through B.
  CHECK(transfer.at("measures").at("QA+:prank").at("clean") ==
        white.at("measures").at("QA+:prank").at("clean"));
  CHECK(adversarial(transfer, "QA+:prank") != adversarial(white, "QA+:prank"));
  CHECK(transfer.at("max_delta").get<double>() <= 0.1 + 1e-6);
  CHECK(transfer.at("source_checkpoint") == a);

  // NES on B: its query count (4 per step, 2 steps) is reported.
  const nlohmann::json nes =
      attack_json(dir, {"--checkpoint", b, "--attack", "ES:eps=0.1:alpha=0.02:nes=4:queries=8"});
  CHECK(nes.at("mode") == "black-box");
  CHECK(nes.at("queries_per_image") == 8);
  CHECK(nes.at("attack") == "ES:eps=0.1:alpha=0.02:pgditer=2:nes=4");
  CHECK(nes.at("max_delta").get<double>() <= 0.1 + 1e-6);

  // A source checkpoint that does not exist: a usage error (exit code 2), before any work.
  dml::Args missing({"--checkpoint", b, "--source-checkpoint", dir.file("missing.safetensors"),
                     "--attack", spec, "--device", "cpu"});
  CHECK_THROWS_AS(dml::run_attack_command(missing), dml::UsageError);
}
