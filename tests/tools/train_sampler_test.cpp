// `dml train` with sampler.name = m_per_class (data/sampler.h MPerClassSampler): the losses that
// take any labeled batch train on it (ArcFace, multi-similarity without SPC-2 anchors, also under
// MDProp), a run resumed mid-epoch is bit-identical (the checkpoint holds the sampler's kind and
// cursor), and the config refuses the losses and defenses that need SPC-2's [a0, p0, a1, p1, ...]
// layout. The batches' composition is tested on the sampler itself (tests/data/sampler_test.cpp).
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/sampler.h"
#include "tests/io/io_test_util.h"
#include "tests/tools/tiny_training.h"
#include "tools/dml/args.h"
#include "tools/dml/trainer.h"

using nlohmann::json;
using tiny_training::checkpoint_tensors;
using tiny_training::log_records;
using tiny_training::tiny_config;

namespace {

// 3 classes x 2 images = 6 images a batch; multi-similarity with every row an anchor.
json m_per_class(const json& extra = json::object()) {
  json config = {
      {"sampler", {{"name", "m_per_class"}, {"classes_per_batch", 3}, {"images_per_class", 2}}},
      {"loss", {{"multi_similarity", {{"spc2_anchors", false}}}}}};
  config.merge_patch(extra);
  return config;
}

std::string usage_error(const std::string& loss, const json& extra) {
  test::TempDir out;
  try {
    tiny_config(loss, out.file("run"), 1, extra);
  } catch (const dml::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("dml train: m_per_class batches train multi_similarity and arcface",
          "[tools][train][sampler]") {
  for (const char* loss : {"multi_similarity", "arcface"}) {
    INFO(loss);
    test::TempDir out;
    REQUIRE(dml::train(tiny_config(loss, out.file("run"), 3, m_per_class()), dml::TrainOptions()) ==
            0);
    const std::vector<json> train = log_records(out.file("run"), "train");
    REQUIRE(train.size() == 3);
    for (const json& record : train) CHECK(std::isfinite(record.at("loss").get<double>()));
    // The sampler stored in the checkpoint is the m_per_class one, 6 images a batch.
    const std::vector<uint8_t> bytes = test::read_bytes(dml::checkpoint_path(out.file("run")));
    const std::string text(bytes.begin(), bytes.end());
    CHECK(text.find("m_per_class") != std::string::npos);
  }
}

TEST_CASE("dml train: an m_per_class run resumed mid-epoch is bit-identical",
          "[tools][train][sampler]") {
  test::TempDir out;
  tiny_training::check_resume_bit_identical(out.file("run"), "multi_similarity", 3,
                                            m_per_class({{"epochs", 2}}), 4);
  // The same with classes and images drawn with replacement (MDProp's sampler).
  tiny_training::check_resume_bit_identical(
      out.file("replacement"), "multi_similarity", 3,
      m_per_class({{"epochs", 2}, {"sampler", {{"with_replacement", true}}}}), 4);
}

TEST_CASE("dml train: mdprop trains on m_per_class batches with multi-similarity",
          "[tools][train][sampler][defenses]") {
  test::TempDir out;
  const json extra = m_per_class({{"model", {{"name", "c2f2-bn"}, {"bn_branches", 2}}},
                                  {"defense",
                                   {{"name", "mdprop"},
                                    {"pgd", {{"eps", 0.03}, {"alpha", 0.03}, {"steps", 1}}},
                                    {"mdprop", {{"targets", {2}}}}}}});
  REQUIRE(dml::train(tiny_config("multi_similarity", out.file("run"), 2, extra),
                     dml::TrainOptions()) == 0);
  for (const json& record : log_records(out.file("run"), "train")) {
    INFO(record.dump());
    CHECK(std::isfinite(record.at("adversarial_loss_1").get<double>()));
    CHECK(record.at("passes_per_batch").get<double>() == 2.0);
  }
}

TEST_CASE("dml train: m_per_class is refused for losses and defenses that need SPC-2",
          "[tools][sampler]") {
  for (const char* loss : {"triplet", "contrastive", "margin", "lifted", "npair"}) {
    INFO(loss);
    CHECK_THAT(usage_error(loss, m_per_class()),
               Catch::Contains("config key 'sampler.name'") && Catch::Contains(loss));
  }
  CHECK_THAT(usage_error("multi_similarity",
                         m_per_class({{"loss", {{"multi_similarity", {{"spc2_anchors", true}}}}}})),
             Catch::Contains("config key 'sampler.name'"));
  CHECK_THAT(usage_error("arcface", m_per_class({{"defense", {{"name", "act"}}}})),
             Catch::Contains("config key 'defense.name'") && Catch::Contains("spc2"));
  CHECK_THAT(usage_error("arcface", m_per_class({{"sampler", {{"images_per_class", 0}}}})),
             Catch::Contains("config key 'sampler.images_per_class'"));
  CHECK_THAT(usage_error("triplet", {{"sampler", {{"with_replacement", true}}}}),
             Catch::Contains("config key 'sampler.with_replacement'"));
  // m_per_class batches are always whole: drop_last would be silently ignored.
  CHECK_THAT(usage_error("arcface", m_per_class({{"sampler", {{"drop_last", true}}}})),
             Catch::Contains("config key 'sampler.drop_last'") && Catch::Contains("spc2"));
  CHECK(usage_error("arcface", m_per_class()).empty());
}
