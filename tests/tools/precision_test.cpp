// The precision policy in dml (engine/precision.h): the config key `precision` (fp32 default,
// tf32, bf16; anything else an error naming the key), stored with the checkpoint and the model,
// read back by load_trained_model and printed by `dml eval`; a CPU run honours tf32 and bf16 (its
// products round their operands as the tensor cores': engine/precision.h), so its weights differ
// from fp32's.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/io/safetensors.h"
#include "engine/precision.h"
#include "tests/io/io_test_util.h"
#include "tests/tools/stderr_capture.h"
#include "tests/tools/tiny_training.h"
#include "tools/dml/args.h"
#include "tools/dml/commands.h"
#include "tools/dml/config.h"
#include "tools/dml/load_model.h"
#include "tools/dml/trainer.h"

using nlohmann::json;

namespace {

// Puts the process's precision back to fp32 when a test ends (the setting is process-wide).
struct RestorePrecision {
  ~RestorePrecision() { engine::set_precision(engine::Precision::Fp32); }
};

std::map<std::string, std::vector<uint8_t>> tensor_bytes(const std::string& path) {
  std::map<std::string, std::vector<uint8_t>> bytes;
  for (const auto& [name, raw] : engine::read_safetensors(path).tensors) bytes[name] = raw.bytes;
  return bytes;
}

// Trains the tiny config into `run_dir` with the config key precision = `precision` and checks
// that the run stored it: in its checkpoint's config, in model.safetensors's dml_model metadata,
// and as load_trained_model reads it back from either file.
void train_tiny_and_check_stored(const std::string& run_dir, const std::string& precision) {
  INFO("precision " << precision);
  REQUIRE(dml::train(tiny_training::tiny_config("triplet", run_dir, 2, {{"precision", precision}}),
                     dml::TrainOptions()) == 0);
  const json checkpoint = json::parse(
      engine::read_safetensors(dml::checkpoint_path(run_dir)).metadata.at("dml_checkpoint"));
  CHECK(checkpoint.at("config").at("precision") == precision);
  const json model = json::parse(
      engine::read_safetensors(run_dir + "/model.safetensors").metadata.at("dml_model"));
  CHECK(model.at("precision") == precision);
  const engine::Device cpu = engine::Device::cpu();
  const auto trained_in = [&](const std::string& file) {
    return engine::precision_name(dml::load_trained_model(file, cpu).precision);
  };
  CHECK(trained_in(run_dir + "/model.safetensors") == precision);
  CHECK(trained_in(dml::checkpoint_path(run_dir)) == precision);
}

}  // namespace

TEST_CASE("config: precision is fp32 by default, tf32 or bf16 by name, else an error naming it",
          "[tools][config]") {
  CHECK(dml::resolve_config(json::object(), "t.json").precision == engine::Precision::Fp32);
  CHECK(dml::resolve_config(json::object(), "t.json").resolved.at("precision") == "fp32");
  CHECK(dml::resolve_config({{"precision", "tf32"}}, "t.json").precision ==
        engine::Precision::Tf32);
  CHECK(dml::resolve_config({{"precision", "bf16"}}, "t.json").precision ==
        engine::Precision::Bf16);
  CHECK_THROWS_AS(dml::resolve_config({{"precision", "fp16"}}, "t.json"), dml::UsageError);
  CHECK_THROWS_WITH(dml::resolve_config({{"precision", "fp16"}}, "t.json"),
                    Catch::Contains("t.json") && Catch::Contains("precision") &&
                        Catch::Contains("fp32, tf32 or bf16"));
  CHECK(engine::parse_precision("tf32") == engine::Precision::Tf32);
  CHECK(std::string(engine::precision_name(engine::Precision::Bf16)) == "bf16");
  CHECK_THROWS_WITH(engine::parse_precision("TF32", "--precision"),
                    Catch::Contains("--precision: unknown precision 'TF32'"));
}

namespace {

// Trains the tiny config in fp32 and in `precision` (tf32 or bf16) on the CPU: both runs store
// their precision, the CPU's products round their operands in `precision` (other weights than
// fp32's), and `dml eval` of the rounded run prints the precision it was trained in beside the
// one it evaluates in.
void check_cpu_run_in(const std::string& precision) {
  RestorePrecision restore;
  test::TempDir dir;
  const std::string fp32_dir = dir.file("fp32"), rounded_dir = dir.file(precision);
  train_tiny_and_check_stored(fp32_dir, "fp32");
  train_tiny_and_check_stored(rounded_dir, precision);
  CHECK(tensor_bytes(fp32_dir + "/model.safetensors") !=
        tensor_bytes(rounded_dir + "/model.safetensors"));

  engine::set_precision(engine::Precision::Fp32);
  const std::string printed = test::output_of(1, dir.file("stdout.txt"), [&] {
    dml::Args args({"--checkpoint", rounded_dir + "/model.safetensors", "--device", "cpu", "--root",
                    tiny_training::data_root(), "--max-images", "10"});
    CHECK(dml::run_eval(args) == 0);
  });
  CHECK_THAT(printed,
             Catch::Contains("precision   trained in " + precision + ", evaluated in fp32\n"));
}

}  // namespace

TEST_CASE("dml train: the precision is stored with the run, a CPU run trains in tf32",
          "[tools][train]") {
  check_cpu_run_in("tf32");
}

TEST_CASE("dml train: precision bf16 runs on the CPU and is stored with the run",
          "[tools][train]") {
  check_cpu_run_in("bf16");
}

TEST_CASE("dml --precision on any subcommand sets the policy, dml train stores it over the key",
          "[tools][train]") {
  RestorePrecision restore;
  test::TempDir dir;
  dml::Args bad({"--precision", "fp16"});
  CHECK_THROWS_AS(dml::take_backend_options(bad), dml::UsageError);
  dml::Args args({"--precision", "tf32"});
  dml::take_backend_options(args);
  CHECK(engine::precision() == engine::Precision::Tf32);
  CHECK(engine::precision_is_set());
  // The config says fp32; the option wins and is what the resolved (stored) config holds.
  std::ofstream(dir.file("c.json")) << R"({"precision": "fp32"})";
  const std::string printed = test::output_of(1, dir.file("stdout.txt"), [&] {
    dml::Args train({"--config", dir.file("c.json"), "--print-config"});
    CHECK(dml::run_train(train) == 0);
  });
  CHECK(json::parse(printed).at("precision") == "tf32");
}
