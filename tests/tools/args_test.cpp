// The `dml` argument parser (tools/dml/args.h): both value forms, and the mistakes that must be
// usage errors (exit code 2) instead of being read as values.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "tools/dml/args.h"

using Catch::Matchers::Contains;

TEST_CASE("args: --key value and --key=value, negative numbers included", "[tools][args]") {
  dml::Args args({"--out", "a.json", "--k=5", "--shift", "-3", "--json"});
  CHECK(args.take_string("--out") == "a.json");
  CHECK(args.take_int("--k") == 5);
  CHECK(args.take_int("--shift") == -3);
  CHECK(args.take_flag("--json"));
  CHECK_NOTHROW(args.finish());
}

TEST_CASE("args: an option followed by another option has no value", "[tools][args]") {
  // `--out --json` would otherwise write a file named "--json" and drop the flag.
  dml::Args forgotten({"--out", "--json"});
  CHECK_THROWS_WITH(forgotten.take_string("--out", ""),
                    Contains("option --out needs a value, got the option --json"));
  // The = form still takes a value that starts with "--", for whoever means it.
  dml::Args explicit_value({"--out=--json"});
  CHECK(explicit_value.take_string("--out") == "--json");
  dml::Args missing({"--out"});
  CHECK_THROWS_WITH(missing.take_string("--out"), Contains("option --out needs a value"));
}

TEST_CASE("args: an output may not be the input file it would destroy", "[tools][args]") {
  const std::string dir = (std::filesystem::temp_directory_path() / "dml_args_test").string();
  std::filesystem::create_directories(dir);
  const std::string weights = dir + "/model.safetensors";
  std::ofstream(weights) << "weights";
  CHECK_THROWS_WITH(dml::refuse_output_over_input(weights, "--out", weights, "--checkpoint"),
                    Contains("--out " + weights + " is the --checkpoint file"));
  // The same file by another spelling of its path.
  CHECK_THROWS_AS(
      dml::refuse_output_over_input(dir + "/./model.safetensors", "--out", weights, "--checkpoint"),
      dml::UsageError);
  CHECK_NOTHROW(dml::refuse_output_over_input(dir + "/ers.json", "--out", weights, "--checkpoint"));
  CHECK_NOTHROW(dml::refuse_output_over_input("", "--out", weights, "--checkpoint"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("args: --conv and --gemm set the process's CUDA backends", "[tools][args]") {
  dml::Args args({"--conv", "cudnn", "--gemm=cublas", "--json"});
  dml::take_backend_options(args);
  CHECK(engine::conv_backend() == engine::ConvBackend::Cudnn);
  CHECK(engine::gemm_backend() == engine::GemmBackend::Cublas);
  CHECK(args.take_flag("--json"));  // the subcommand's own options are left to it
  CHECK_NOTHROW(args.finish());
  dml::Args bad({"--conv", "cublas"});
  CHECK_THROWS_AS(dml::take_backend_options(bad), dml::UsageError);
  engine::set_conv_backend(engine::ConvBackend::Ours);  // the process-wide defaults again
  engine::set_gemm_backend(engine::GemmBackend::Ours);
}
