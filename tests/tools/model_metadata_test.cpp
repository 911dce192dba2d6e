// dml::read_model_metadata (tools/dml/load_model.h): what a model file's metadata says, checked
// and parsed before a model is built. Hand-written metadata in both forms (dml_model, and
// dml_checkpoint's training config), each field spoiled in turn.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "kernels/common/check.h"
#include "tools/dml/args.h"
#include "tools/dml/load_model.h"

namespace {

constexpr int64_t kLargestExtent = 64;  // as if the file's widest tensor were [64, ...]

dml::TrainedModel read_model(const std::string& text) {
  return dml::read_model_metadata({{"dml_model", text}}, kLargestExtent, "m.safetensors");
}

// A dml_model text with one field replaced (or removed, with an empty value).
std::string model_with(const std::string& field, const std::string& value) {
  std::map<std::string, std::string> fields = {
      {"name", "\"c2f2-bn\""},         {"embedding_dim", "64"}, {"bn_branches", "2"},
      {"data", "\"fashion-mnist\""},   {"metric", "\"C\""},     {"precision", "\"bf16\""},
      {"transform", "\"revisiting\""}, {"root", "\"/data\""}};
  if (value.empty()) {
    fields.erase(field);
  } else {
    fields[field] = value;
  }
  std::string text = "{";
  for (const auto& [key, v] : fields)
    text += (text.size() > 1 ? "," : "") + ("\"" + key + "\":" + v);
  return text + "}";
}

}  // namespace

TEST_CASE("read_model_metadata reads every field of a model's metadata", "[tools][metadata]") {
  const dml::TrainedModel m = read_model(model_with("name", "\"c2f2-bn\""));
  CHECK(m.config.name == "c2f2-bn");
  CHECK(m.config.embedding_dim == 64);
  CHECK(m.config.bn_branches == 2);
  CHECK(m.data == "fashion-mnist");
  CHECK(m.root == "/data");
  CHECK(m.transform == "revisiting");
  CHECK(m.metric == losses::Metric::C);
  CHECK(m.precision == engine::Precision::Bf16);
  CHECK_FALSE(m.model);
  // Files written before the precision policy and the data root: fp32, "" and robrank.
  const dml::TrainedModel old = read_model(
      R"({"name":"c2f2","embedding_dim":8,"bn_branches":1,"data":"mnist","metric":"N"})");
  CHECK(old.precision == engine::Precision::Fp32);
  CHECK(old.root.empty());
  CHECK(old.transform == "robrank");
}

TEST_CASE("read_model_metadata reads a checkpoint's training config", "[tools][metadata]") {
  const std::string meta =
      R"({"format":1,"step":200,"config":{"model":{"name":"c2f2","embedding_dim":16,)"
      R"("bn_branches":1},"data":{"name":"fashion-mnist","root":"r"},"loss":{"metric":"E"},)"
      R"("precision":"tf32"}})";
  const dml::TrainedModel m =
      dml::read_model_metadata({{"dml_checkpoint", meta}}, kLargestExtent, "c.safetensors");
  CHECK(m.config.name == "c2f2");
  CHECK(m.config.embedding_dim == 16);
  CHECK(m.root == "r");
  CHECK(m.transform == "robrank");
  CHECK(m.metric == losses::Metric::E);
  CHECK(m.precision == engine::Precision::Tf32);
  CHECK_THROWS_WITH(
      dml::read_model_metadata({{"dml_checkpoint", R"({"config":[]})"}}, 64, "c.safetensors"),
      Catch::Contains("c.safetensors: unreadable dml_checkpoint metadata"));
  CHECK_THROWS_AS(dml::read_model_metadata({{"format", "pt"}}, 64, "w.safetensors"),
                  dml::UsageError);
}

TEST_CASE("read_model_metadata refuses each spoiled field, naming the file and the field",
          "[tools][metadata]") {
  const std::map<std::string, std::pair<std::string, std::string>> spoiled = {
      // field: {value, what the error says after "m.safetensors: malformed model metadata: "}
      {"name", {"\"c3f3\"", "unknown model 'c3f3'"}},
      {"data", {"\"cifar10\"", "unknown data set 'cifar10'"}},
      {"metric", {"\"Q\"", "metric: "}},
      {"precision", {"\"fp16\"", "precision: "}},
      {"transform", {"\"imagenet\"", "transform: unknown image transform 'imagenet'"}},
      // One past the widest tensor: a model that large cannot be in this file.
      {"embedding_dim", {"65", "embedding_dim 65 is not between 1 and 64"}},
      {"bn_branches", {"0", "bn_branches 0 is not between 1 and 64"}},
  };
  for (const auto& [field, case_] : spoiled) {
    INFO(field << " = " << case_.first);
    CHECK_THROWS_WITH(read_model(model_with(field, case_.first)),
                      Catch::Contains("m.safetensors: malformed model metadata: " + case_.second));
  }
  CHECK_THROWS_WITH(read_model(model_with("metric", "")),
                    Catch::Contains("m.safetensors: malformed model metadata: "));
  CHECK_THROWS_WITH(read_model("[1, 2]"),
                    Catch::Contains("m.safetensors: malformed model metadata: not a JSON object"));
  CHECK_THROWS_WITH(read_model("{\"name\""),
                    Catch::Contains("m.safetensors: malformed model metadata: not a JSON object"));
  // At the bound, both counts are accepted.
  CHECK(read_model(model_with("bn_branches", "64")).config.bn_branches == 64);
}
