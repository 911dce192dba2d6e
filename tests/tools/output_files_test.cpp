// Results are never lost (tools/dml/output_files.h): a command refuses to replace a finished
// result unless told (--overwrite, or --resume where it continues it), checks every output path
// before the work starts, and the next run cleans what a killed writer left. A run is identified
// by what it is, not by its path: a moved run folder resumes, and `dml ers --resume` accepts the
// same weights under another path. On the tiny C2F2 and generated data of tiny_training.h.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/io/npy.h"
#include "engine/io/safetensors.h"
#include "kernels/common/check.h"
#include "tests/io/io_test_util.h"
#include "tests/tools/tiny_training.h"
#include "tools/dml/args.h"
#include "tools/dml/commands.h"
#include "tools/dml/load_model.h"
#include "tools/dml/trainer.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

std::string read_text(const std::string& path) {
  const std::vector<uint8_t> bytes = test::read_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

void write_text(const std::string& path, const std::string& text) {
  test::write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

int ers(const std::string& checkpoint, const std::string& out, std::vector<std::string> extra) {
  std::vector<std::string> tokens = {
      "--checkpoint", checkpoint, "--profile", "rob28", "--max-images", "3",
      "--device",     "cpu",      "--out",     out,     "--root",       tiny_training::data_root()};
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  dml::Args args(tokens);
  return dml::run_ers(args);
}

int attack(const std::string& checkpoint, std::vector<std::string> extra) {
  std::vector<std::string> tokens = {"--checkpoint", checkpoint,
                                     "--attack",     "ES:eps=0.1:alpha=0.02:pgditer=2",
                                     "--max-images", "2",
                                     "--device",     "cpu",
                                     "--root",       tiny_training::data_root()};
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  dml::Args args(tokens);
  return dml::run_attack_command(args);
}

int embed(const std::string& weights, const std::string& out, std::vector<std::string> extra) {
  std::vector<std::string> tokens = {
      "--model",         "c2f2",
      "--embedding-dim", std::to_string(tiny_training::kEmbeddingDim),
      "--weights",       weights,
      "--data",          "mnist",
      "--root",          tiny_training::data_root(),
      "--device",        "cpu",
      "--out",           out};
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  dml::Args args(tokens);
  return dml::run_embed(args);
}

// One tiny trained model per test binary run: the tests below only read it.
const std::string& tiny_checkpoint() {
  static test::TempDir dir;
  static const std::string path = [] {
    REQUIRE(dml::train(tiny_training::tiny_config("triplet", dir.file("run"), 2),
                       dml::TrainOptions()) == 0);
    return dir.file("run/model.safetensors");
  }();
  return path;
}

}  // namespace

TEST_CASE("dml ers, attack and embed refuse to replace a result unless --overwrite",
          "[tools][output]") {
  test::TempDir dir;
  const std::string checkpoint = tiny_checkpoint();
  const std::string finished = "a finished result, hours of attacks\n";

  const std::string ers_out = dir.file("ers.json");
  write_text(ers_out, finished);
  REQUIRE_THROWS_AS(ers(checkpoint, ers_out, {}), dml::UsageError);
  REQUIRE_THROWS_WITH(ers(checkpoint, ers_out, {}),
                      Catch::Contains(ers_out) && Catch::Contains("--overwrite"));
  CHECK(read_text(ers_out) == finished);
  REQUIRE_THROWS_WITH(ers(checkpoint, ers_out, {"--resume", "--overwrite"}),
                      Catch::Contains("exclude each other"));
  REQUIRE(ers(checkpoint, ers_out, {"--overwrite"}) == 0);
  CHECK(read_json(ers_out).at("complete") == true);

  const std::string npy = dir.file("adversarial.npy");
  write_text(npy, finished);
  REQUIRE_THROWS_AS(attack(checkpoint, {"--save-adversarial", npy}), dml::UsageError);
  CHECK(read_text(npy) == finished);
  REQUIRE(attack(checkpoint, {"--save-adversarial", npy, "--overwrite"}) == 0);
  CHECK(read_text(npy) != finished);

  const std::string embeddings = dir.file("embeddings.npy");
  write_text(embeddings, finished);
  REQUIRE_THROWS_AS(embed(checkpoint, embeddings, {}), dml::UsageError);
  CHECK(read_text(embeddings) == finished);
  REQUIRE(embed(checkpoint, embeddings, {"--overwrite"}) == 0);
  CHECK(read_text(embeddings) != finished);
}

TEST_CASE("output paths are checked before the work starts", "[tools][output]") {
  test::TempDir dir;
  const std::string checkpoint = tiny_checkpoint();
  write_text(dir.file("a-file"), "x");
  fs::create_directories(dir.file("a-folder"));
  // A folder given as the file, a folder that does not exist, a "folder" that is a file: usage
  // errors (exit 2) that name the option, not a filesystem exception after the attacks.
  REQUIRE_THROWS_WITH(ers(checkpoint, dir.file("a-folder"), {}),
                      Catch::Contains("--out") && Catch::Contains("is a folder"));
  REQUIRE_THROWS_WITH(ers(checkpoint, dir.file("missing/ers.json"), {}),
                      Catch::Contains("--out") && Catch::Contains("does not exist"));
  REQUIRE_THROWS_WITH(embed(checkpoint, dir.file("a-file/e.npy"), {}),
                      Catch::Contains("--out") && Catch::Contains("is not a folder"));
  REQUIRE_THROWS_AS(attack(checkpoint, {"-X", dir.file("a-file/pairs")}), dml::UsageError);
  REQUIRE_THROWS_WITH(attack(checkpoint, {"-X", dir.file("a-file/pairs")}),
                      Catch::Contains("-X") && Catch::Contains("cannot create the folder"));
  dml::Args report({"--log", tiny_training::data_root(), "--out", dir.file("a-folder")});
  REQUIRE_THROWS_WITH(dml::run_report(report), Catch::Contains("is a folder"));
  CHECK_FALSE(fs::exists(dir.file("missing")));
  // -X creates a folder that is missing.
  REQUIRE(attack(checkpoint, {"-X", dir.file("new/pairs")}) == 0);
  CHECK(fs::is_directory(dir.file("new/pairs")));
}

TEST_CASE("dml ers --resume accepts the same weights under another path", "[tools][output]") {
  test::TempDir dir;
  const std::string checkpoint = tiny_checkpoint();
  REQUIRE(ers(checkpoint, dir.file("whole.json"), {}) == 0);
  // Interrupted before its last attack: the resume runs that one, under the new path.
  json partial = read_json(dir.file("whole.json"));
  partial["complete"] = false;
  partial.erase("ers");
  partial["attacks"].erase(partial["attacks"].size() - 1);
  REQUIRE_FALSE(partial["attacks"].empty());
  std::ofstream(dir.file("partial.json")) << partial.dump(2);
  // The weights moved: same bytes, another path.
  fs::copy_file(checkpoint, dir.file("moved.safetensors"));
  REQUIRE(ers(dir.file("moved.safetensors"), dir.file("partial.json"), {"--resume"}) == 0);
  const json resumed = read_json(dir.file("partial.json"));
  CHECK(resumed.at("complete") == true);
  CHECK(resumed.at("checkpoint") == dir.file("moved.safetensors"));
  CHECK(resumed.at("ers") == read_json(dir.file("whole.json")).at("ers"));
}

TEST_CASE("a moved run folder resumes, and a new run cleans what a killed writer left",
          "[tools][output]") {
  test::TempDir dir;
  const dml::TrainConfig whole = tiny_training::tiny_config("triplet", dir.file("whole"), 4);
  REQUIRE(dml::train(whole, dml::TrainOptions()) == 0);

  dml::TrainOptions stop;
  stop.stop_after_batches = 2;
  REQUIRE(dml::train(tiny_training::tiny_config("triplet", dir.file("first"), 4), stop) == 0);
  fs::rename(dir.file("first"), dir.file("moved"));
  // What a writer killed mid-write leaves: removed as the resumed run starts (before its first
  // step), not only when it writes the same file again at its end.
  const std::string dead = test::dead_process_id();
  REQUIRE_FALSE(dead.empty());
  const std::string abandoned = dir.file("moved/model.safetensors.tmp." + dead);
  write_text(abandoned, "half a file");
  dml::TrainOptions resume;
  resume.resume = true;
  resume.stop_after_batches = 3;  // stops again before writing model.safetensors
  REQUIRE(dml::train(tiny_training::tiny_config("triplet", dir.file("moved"), 4), resume) == 0);
  CHECK_FALSE(fs::exists(abandoned));
  resume.stop_after_batches = 0;
  REQUIRE(dml::train(tiny_training::tiny_config("triplet", dir.file("moved"), 4), resume) == 0);
  CHECK(read_text(dir.file("moved/metrics.json")) == read_text(dir.file("whole/metrics.json")));
  CHECK(test::read_bytes(dir.file("moved/model.safetensors")) ==
        test::read_bytes(dir.file("whole/model.safetensors")));
}

TEST_CASE("dml train --resume before any checkpoint says to start without it", "[tools][output]") {
  test::TempDir dir;
  dml::TrainOptions resume;
  resume.resume = true;
  const dml::TrainConfig config = tiny_training::tiny_config("triplet", dir.file("run"), 2);
  REQUIRE_THROWS_AS(dml::train(config, resume), dml::UsageError);
  REQUIRE_THROWS_WITH(dml::train(config, resume),
                      Catch::Contains("no checkpoint at") && Catch::Contains("without --resume"));
}

TEST_CASE("a bad metric is blamed on its source: the option, or the file's metadata",
          "[tools][output]") {
  test::TempDir dir;
  // The tiny model's weights with the metric of its metadata spoiled.
  engine::SafetensorsFile file = engine::read_safetensors(tiny_checkpoint());
  json model = json::parse(file.metadata.at("dml_model"));
  model["metric"] = "Q";
  file.metadata["dml_model"] = model.dump();
  engine::write_safetensors(dir.file("spoiled.safetensors"), file);
  auto eval = [&](const std::string& checkpoint, std::vector<std::string> extra) {
    std::vector<std::string> tokens = {"--checkpoint", checkpoint, "--device",
                                       "cpu",          "--root",   tiny_training::data_root()};
    tokens.insert(tokens.end(), extra.begin(), extra.end());
    dml::Args args(tokens);
    return dml::run_eval(args);
  };
  REQUIRE_THROWS_AS(eval(tiny_checkpoint(), {"--metric", "Q"}), dml::UsageError);
  REQUIRE_THROWS_WITH(eval(tiny_checkpoint(), {"--metric", "Q"}), Catch::Contains("--metric"));
  REQUIRE_THROWS_AS(eval(dir.file("spoiled.safetensors"), {}), engine::Error);
  REQUIRE_THROWS_WITH(eval(dir.file("spoiled.safetensors"), {}),
                      Catch::Contains("spoiled.safetensors: malformed model metadata: metric") &&
                          !Catch::Contains("--metric"));
  // A sound option is taken as the config takes it (lower case included).
  CHECK(eval(tiny_checkpoint(), {"--metric", "c", "--max-images", "10", "--json"}) == 0);
}

// nlohmann's get<int64_t>() converts a floating-point number, out of range undefined behaviour:
// the counts of a model's or a checkpoint's metadata are read through dml::integer_at instead.
TEST_CASE("a count in a file's metadata that is not an integer is refused, naming the file",
          "[tools][output]") {
  test::TempDir dir;
  engine::SafetensorsFile file = engine::read_safetensors(tiny_checkpoint());
  json model = json::parse(file.metadata.at("dml_model"));
  model["embedding_dim"] = 1e300;
  file.metadata["dml_model"] = model.dump();
  engine::write_safetensors(dir.file("spoiled.safetensors"), file);
  REQUIRE_THROWS_WITH(dml::load_trained_model(dir.file("spoiled.safetensors"), engine::Device()),
                      Catch::Contains("spoiled.safetensors: model metadata: \"embedding_dim\" "
                                      "1e+300 is not an integer"));
  // An integer, but wider than any tensor in the file: refused before a model with 2^40 outputs
  // is built (its last layer alone would take terabytes).
  model["embedding_dim"] = int64_t{1} << 40;
  file.metadata["dml_model"] = model.dump();
  engine::write_safetensors(dir.file("spoiled.safetensors"), file);
  REQUIRE_THROWS_WITH(dml::load_trained_model(dir.file("spoiled.safetensors"), engine::Device()),
                      Catch::Contains("spoiled.safetensors: malformed model metadata: "
                                      "embedding_dim 1099511627776 is not between 1 and "));

  // A training checkpoint whose step is 2.5: --resume names the file and the key.
  const dml::TrainConfig config = tiny_training::tiny_config("triplet", dir.file("run"), 1);
  REQUIRE(dml::train(config, dml::TrainOptions()) == 0);
  const std::string checkpoint = dir.file("run/checkpoint.safetensors");
  engine::SafetensorsFile saved = engine::read_safetensors(checkpoint);
  json meta = json::parse(saved.metadata.at("dml_checkpoint"));
  meta["step"] = 2.5;
  saved.metadata["dml_checkpoint"] = meta.dump();
  engine::write_safetensors(checkpoint, saved);
  dml::TrainOptions resume;
  resume.resume = true;
  REQUIRE_THROWS_AS(dml::train(config, resume), engine::Error);
  REQUIRE_THROWS_WITH(dml::train(config, resume),
                      Catch::Contains("checkpoint.safetensors: dml_checkpoint metadata: \"step\" "
                                      "2.5 is not an integer"));
}

TEST_CASE("dml embed --labels-out writes the labels dml metrics needs", "[tools][output]") {
  test::TempDir dir;
  REQUIRE(embed(tiny_checkpoint(), dir.file("e.npy"), {"--labels-out", dir.file("l.npy")}) == 0);
  const engine::Tensor labels = engine::load_npy(dir.file("l.npy"));
  REQUIRE(labels.dtype() == engine::DType::I64);
  REQUIRE(labels.shape() ==
          engine::Shape{30});  // tiny_training's test split: image i, class i % 10
  const std::vector<double> values = labels.to_vector();
  for (size_t i = 0; i < values.size(); ++i) CHECK(values[i] == static_cast<double>(i % 10));
  dml::Args metrics({"--embeddings", dir.file("e.npy"), "--labels", dir.file("l.npy"), "--json"});
  CHECK(dml::run_metrics(metrics) == 0);
  // Images from a file have no labels to write.
  write_text(dir.file("images.npy"), "");
  dml::Args no_labels({"--model", "c2f2", "--embedding-dim", "8", "--weights", tiny_checkpoint(),
                       "--input", dir.file("images.npy"), "--out", dir.file("x.npy"),
                       "--labels-out", dir.file("y.npy")});
  REQUIRE_THROWS_WITH(dml::run_embed(no_labels), Catch::Contains("--labels-out go with --data"));
}
