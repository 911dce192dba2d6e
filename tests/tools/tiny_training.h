// A generated 10-class data set in MNIST's IDX format and tiny `dml train` configs on it, shared
// by the tools tests that run the trainer (train_losses_test.cpp, train_defenses_test.cpp). Each
// image is a bright square whose place depends on the class, on noise; C2F2 with D = 8, SPC-2
// batches of 4 pairs and a 20-image evaluation, so a run takes well under a second.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/idx.h"
#include "engine/io/safetensors.h"
#include "tests/io/io_test_util.h"
#include "tools/dml/config.h"
#include "tools/dml/trainer.h"
#include "tools/dml/version.h"

namespace tiny_training {

using nlohmann::json;

constexpr int64_t kClasses = 10;
constexpr int64_t kEmbeddingDim = 8;
constexpr uint64_t kSeed = 5;

// n images of 28x28: image i has class i % 10, uniform noise in [0, 48) and a 7x7 square of 255 at
// row 3 + 12 (c / 5), column 1 + 5 (c % 5), shifted by up to one pixel at random.
inline void write_split(const std::string& dir, const std::string& prefix, int64_t n,
                        uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<uint8_t> pixels, labels;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = i % kClasses;
    std::vector<uint8_t> image(28 * 28);
    for (uint8_t& p : image) p = static_cast<uint8_t>(random() % 48);
    const int64_t top = 3 + 12 * (c / 5) + static_cast<int64_t>(random() % 3) - 1;
    const int64_t left = 1 + 5 * (c % 5) + static_cast<int64_t>(random() % 3) - 1;
    for (int64_t y = top; y < top + 7; ++y) {
      for (int64_t x = left; x < left + 7; ++x) {
        if (y >= 0 && y < 28 && x >= 0 && x < 28) image[static_cast<size_t>(y * 28 + x)] = 255;
      }
    }
    pixels.insert(pixels.end(), image.begin(), image.end());
    labels.push_back(static_cast<uint8_t>(c));
  }
  test::write_bytes(dir + "/" + prefix + "-images-idx3-ubyte",
                    data::idx_bytes(data::IdxHeader{0x08, {n, 28, 28}}, pixels));
  test::write_bytes(dir + "/" + prefix + "-labels-idx1-ubyte",
                    data::idx_bytes(data::IdxHeader{0x08, {n}}, labels));
}

// The generated data set, written once per test binary run.
inline const std::string& data_root() {
  static test::TempDir dir;
  static const bool written = [] {
    write_split(dir.file(""), "train", 100, 1);
    write_split(dir.file(""), "t10k", 30, 2);
    return true;
  }();
  (void)written;
  static const std::string root = dir.file("");
  return root;
}

// `steps` batches of 4 pairs in one epoch, evaluation at the end on 20 test images; `extra` is
// merged over it (json::merge_patch).
inline dml::TrainConfig tiny_config(const std::string& loss, const std::string& output_dir,
                                    int64_t steps, const json& extra = json::object()) {
  json config = {{"data", {{"name", "mnist"}, {"root", data_root()}, {"num_workers", 0}}},
                 {"model", {{"name", "c2f2"}, {"embedding_dim", kEmbeddingDim}}},
                 {"sampler", {{"pairs_per_batch", 4}, {"max_batches_per_epoch", steps}}},
                 {"loss", {{"name", loss}}},
                 {"epochs", 1},
                 {"eval", {{"every_epochs", 0}, {"max_images", 20}, {"batch_size", 20}}},
                 {"log_every_batches", 1},
                 {"output_dir", output_dir},
                 {"seed", kSeed},
                 {"device", "cpu"}};
  config.merge_patch(extra);
  return dml::resolve_config(config, loss + " test config");
}

inline std::vector<json> log_records(const std::string& output_dir, const std::string& type) {
  std::ifstream in(output_dir + "/log.jsonl");
  std::vector<json> records;
  std::string line;
  while (std::getline(in, line)) {
    json record = json::parse(line);
    if (record.at("type") == type) records.push_back(record);
  }
  return records;
}

inline std::map<std::string, engine::RawTensor> checkpoint_tensors(const std::string& output_dir) {
  std::map<std::string, engine::RawTensor> tensors;
  for (auto& [name, raw] : engine::read_safetensors(dml::checkpoint_path(output_dir)).tensors) {
    tensors[name] = raw;
  }
  return tensors;
}

// Trains `loss` with `run` twice into `dir`: once whole, once stopped after `stop_after` steps and
// resumed. The two must end bit-identical: final weights, metrics.json and every checkpoint
// tensor (model, optimizers, loss parameters, defense state). Returns the checkpoint's tensor
// names, for callers that check which state was saved.
inline std::vector<std::string> check_resume_bit_identical(const std::string& dir,
                                                           const std::string& loss,
                                                           int64_t steps_per_epoch, const json& run,
                                                           int64_t stop_after) {
  const std::string whole_dir = dir + "/whole", split_dir = dir + "/split";
  REQUIRE(dml::train(tiny_config(loss, whole_dir, steps_per_epoch, run), dml::TrainOptions()) == 0);
  dml::TrainOptions stop;
  stop.stop_after_batches = stop_after;
  const dml::TrainConfig split = tiny_config(loss, split_dir, steps_per_epoch, run);
  REQUIRE(dml::train(split, stop) == 0);
  CHECK_FALSE(std::filesystem::exists(split_dir + "/model.safetensors"));
  dml::TrainOptions resume;
  resume.resume = true;
  REQUIRE(dml::train(split, resume) == 0);

  CHECK(test::read_bytes(whole_dir + "/model.safetensors") ==
        test::read_bytes(split_dir + "/model.safetensors"));
  CHECK(test::read_bytes(whole_dir + "/metrics.json") ==
        test::read_bytes(split_dir + "/metrics.json"));
  // The weights name the revision of the dml that wrote them, and the data's root, so that
  // `dml eval --checkpoint model.safetensors` finds the data as the checkpoint would.
  const json model_meta = json::parse(
      engine::read_safetensors(whole_dir + "/model.safetensors").metadata.at("dml_model"));
  CHECK(model_meta.at("dml_commit") == dml::build_commit());
  CHECK(model_meta.at("root") == split.data_root);
  const auto whole = checkpoint_tensors(whole_dir);
  const auto resumed = checkpoint_tensors(split_dir);
  REQUIRE(whole.size() == resumed.size());
  std::vector<std::string> names;
  for (const auto& [name, raw] : whole) {
    INFO(name);
    REQUIRE(resumed.count(name) == 1);
    CHECK(resumed.at(name).bytes == raw.bytes);
    names.push_back(name);
  }
  return names;
}

}  // namespace tiny_training
