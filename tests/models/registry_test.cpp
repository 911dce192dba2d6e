// Models by name: parameter counts against torchvision's and hand-computed ones, registry errors,
// seeding, the module tree of `dml info`, and the batched eval-mode embedding of `dml embed`.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/nn.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "models/c2f2.h"
#include "models/embed.h"
#include "models/registry.h"
#include "models/resnet.h"
#include "models/summary.h"
#include "tests/models/helpers.h"
#include "tests/support/allclose.h"

using engine::Tensor;
namespace nn = engine::nn;

namespace {

// init = false skips the ResNets' kaiming re-init: parameter counts do not depend on values, and
// the CPU reference RNG makes the re-init of 60M parameters take seconds.
std::shared_ptr<models::Model> build(const std::string& name, int64_t dim, int64_t k = 1,
                                     bool frozen = false, bool init = true) {
  return models_test::build_model(1, name, dim, k, frozen, init);
}

}  // namespace

TEST_CASE("c2f2: parameter count 3,789,184 at D = 512", "[models]") {
  // conv1 32*1*5*5 + 32 = 832; conv2 64*32*5*5 + 64 = 51,264; fc1 3136*1024 + 1024 = 3,212,288;
  // fc2 1024*512 + 512 = 524,800.  832 + 51,264 + 3,212,288 + 524,800 = 3,789,184.
  auto model = build("c2f2", 512);
  CHECK(model->parameter_count() == 3789184);
  CHECK(model->name() == "c2f2");
  CHECK(model->input_shape() == engine::Shape{1, 28, 28});
  std::vector<std::string> names;
  for (const auto& entry : model->named_parameters()) names.push_back(entry.first);
  CHECK(names == std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight",
                                          "conv2.bias", "fc1.weight", "fc1.bias", "fc2.weight",
                                          "fc2.bias"});
  // D = 128: fc2 = 1024*128 + 128 = 131,200 instead of 524,800.
  CHECK(build("c2f2", 128)->parameter_count() == 3789184 - 524800 + 131200);
}

TEST_CASE("c2f2-bn: parameter count adds 2 (32 + 64 + 1024) per branch", "[models]") {
  // BN weight + bias: 2 * (32 + 64 + 1024) = 2,240 per branch.
  CHECK(build("c2f2-bn", 512)->parameter_count() == 3789184 + 2240);
  CHECK(build("c2f2-bn", 512, 3)->parameter_count() == 3789184 + 3 * 2240);
  auto model = build("c2f2-bn", 512, 2);
  nn::StateDict state = model->state_dict();
  for (const char* key : {"bn1.weight", "bn1.aux_bn.0.running_var", "bn2.running_mean",
                          "bn3.num_batches_tracked", "bn3.aux_bn.0.bias"}) {
    INFO(key);
    CHECK(state.contains(key));
  }
  CHECK(state.at("bn3.weight").shape() == engine::Shape{1024});
  CHECK(state.at("bn2.aux_bn.0.running_mean").shape() == engine::Shape{64});
}

TEST_CASE("resnet18: parameter count 11,689,512 (torchvision) at D = 1000", "[models]") {
  CHECK(build("resnet18", 1000)->parameter_count() == 11689512);
}

TEST_CASE("resnet50: parameter count 25,557,032 (torchvision) at D = 1000", "[models]") {
  CHECK(build("resnet50", 1000, 1, false, false)->parameter_count() == 25557032);
}

TEST_CASE("resnet34: parameter count 21,797,672 (torchvision) at D = 1000", "[models]") {
  CHECK(build("resnet34", 1000, 1, false, false)->parameter_count() == 21797672);
}

TEST_CASE("resnet101: parameter count 44,549,160 (torchvision) at D = 1000", "[models]") {
  CHECK(build("resnet101", 1000, 1, false, false)->parameter_count() == 44549160);
}

TEST_CASE("resnet152: parameter count 60,192,808 (torchvision) at D = 1000", "[models]") {
  CHECK(build("resnet152", 1000, 1, false, false)->parameter_count() == 60192808);
}

TEST_CASE("resnet18: embedding head and K branches change only fc and BN counts", "[models]") {
  // fc 512 -> 512 instead of 512 -> 1000: (512 * 512 + 512) - (512 * 1000 + 1000).
  const int64_t d512 = 11689512 - (512 * 1000 + 1000) + (512 * 512 + 512);
  CHECK(build("resnet18", 512, 1, false, false)->parameter_count() == d512);
  // ResNet-18 BN channels: stem 64; layer1 4 x 64; layer2 4 x 128 + downsample 128;
  // layer3 4 x 256 + 256; layer4 4 x 512 + 512 -> 64 + 256 + 640 + 1280 + 2560 = 4,800 channels,
  // each with weight and bias: 9,600 parameters per extra branch.
  CHECK(build("resnet18", 512, 3, false, false)->parameter_count() == d512 + 2 * 9600);
  auto resnet = std::dynamic_pointer_cast<models::ResNet>(build("resnet18", 64));
  REQUIRE(resnet);
  CHECK(resnet->feature_dim() == 512);
  CHECK(resnet->input_shape() == engine::Shape{3, 0, 0});
}

TEST_CASE("registry: names, unknown names and invalid options are errors", "[models]") {
  CHECK(models::model_names() == std::vector<std::string>{"c2f2", "c2f2-bn", "resnet18", "resnet34",
                                                          "resnet50", "resnet101", "resnet152"});
  CHECK(models::is_model_name("resnet101"));
  CHECK_FALSE(models::is_model_name("resnet20"));
  REQUIRE_THROWS_WITH(build("vgg16", 512),
                      Catch::Contains("unknown model 'vgg16'") && Catch::Contains("resnet152"));
  REQUIRE_THROWS_WITH(build("c2f2", 512, 2), Catch::Contains("c2f2-bn"));
  REQUIRE_THROWS_WITH(build("c2f2", 512, 1, true), Catch::Contains("frozen_bn"));
  REQUIRE_THROWS_WITH(build("c2f2", 0), Catch::Contains("embedding_dim"));
  REQUIRE_THROWS_WITH(build("resnet18", -3), Catch::Contains("resnet18: embedding_dim"));
  REQUIRE_THROWS_WITH(build("c2f2-bn", 16, 0), Catch::Contains("bn_branches"));
  REQUIRE_THROWS_WITH(models::resnet_layout(20), Catch::Contains("depth 20"));
}

TEST_CASE("registry: the same seed builds the same weights", "[models]") {
  models::ModelConfig config;
  config.name = "c2f2";
  config.embedding_dim = 8;
  engine::Generator a(5), b(5), c(6);
  auto first = models::build_model(config, a);
  auto second = models::build_model(config, b);
  auto third = models::build_model(config, c);
  std::vector<double> w1 = first->state_dict().at("fc2.weight").to_vector();
  CHECK(w1 == second->state_dict().at("fc2.weight").to_vector());
  CHECK(w1 != third->state_dict().at("fc2.weight").to_vector());
}

TEST_CASE("resnet init: kaiming-normal fan_out convs, BN 1/0, PyTorch-default fc", "[models]") {
  auto model = build("resnet18", 100);
  nn::StateDict state = model->state_dict();
  // layer4.0.conv2: fan_out = 512 * 3 * 3 = 4608, std sqrt(2 / 4608) = 0.0208333;
  // 2.36M samples estimate it to well under 1%.
  std::vector<double> w = state.at("layer4.0.conv2.weight").to_vector();
  double sum = 0, sum_sq = 0;
  for (double v : w) sum += v, sum_sq += v * v;
  double mean = sum / double(w.size());
  double stddev = std::sqrt(sum_sq / double(w.size()) - mean * mean);
  CHECK(std::fabs(mean) < 1e-3);
  CHECK(stddev == Approx(std::sqrt(2.0 / 4608.0)).epsilon(0.01));
  test::require_close(state.at("layer2.1.bn2.weight"), std::vector<double>(128, 1.0), 0, 0, "bn w");
  test::require_close(state.at("layer2.1.bn2.bias"), std::vector<double>(128, 0.0), 0, 0, "bn b");
  // fc: U(-1/sqrt(512), 1/sqrt(512)) = U(-0.0441942, 0.0441942) for weight and bias.
  double largest = 0;
  for (double v : state.at("fc.weight").to_vector()) largest = std::max(largest, std::fabs(v));
  CHECK(largest <= 0.0441942);
  CHECK(largest > 0.04);  // 51,200 draws reach close to the bound
}

TEST_CASE("summary: thousands separators and module descriptions", "[models]") {
  CHECK(models::with_thousands(0) == "0");
  CHECK(models::with_thousands(999) == "999");
  CHECK(models::with_thousands(1000) == "1,000");
  CHECK(models::with_thousands(11689512) == "11,689,512");
  CHECK(models::with_thousands(-1234567) == "-1,234,567");
  engine::Generator gen(0);
  CHECK(models::describe_module(nn::Conv2d(3, 64, 7, 2, 3, 1, false, gen)) ==
        "Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)");
  CHECK(models::describe_module(nn::BatchNorm2d(64, 2)) ==
        "BatchNorm2d(64, eps=1e-05, momentum=0.1, branches=2)");
  CHECK(models::describe_module(nn::Linear(512, 128, true, gen)) == "Linear(512, 128)");
  CHECK(models::describe_module(nn::MaxPool2d(3, 2, 1)) ==
        "MaxPool2d(kernel_size=3, stride=2, padding=1)");
}

TEST_CASE("summary: module tree of resnet18 names torchvision's modules and the count",
          "[models]") {
  auto model = build("resnet18", 1000, 1, false, false);
  std::string tree = models::module_tree(*model);
  INFO(tree);
  CHECK(tree.rfind("resnet18 ", 0) == 0);
  CHECK(tree.find("parameters: 11,689,512\n") != std::string::npos);
  CHECK(tree.find("\n  conv1 ") != std::string::npos);
  CHECK(tree.find("\n        layer2.0.downsample.0 ") != std::string::npos);
  CHECK(tree.find("\n    layer4.1 ") != std::string::npos);
  CHECK(tree.find("Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)") !=
        std::string::npos);
  CHECK(tree.find("AdaptiveAvgPool2d(output_size=(1, 1))") != std::string::npos);
  CHECK(tree.find("Linear(512, 1000)") != std::string::npos);
  CHECK(tree.find("BasicBlock") != std::string::npos);
  // fc alone: 512 * 1000 + 1000 = 513,000.
  CHECK(tree.find("513,000") != std::string::npos);
}

TEST_CASE("embed: batches equal one forward, eval mode, mode restored", "[models]") {
  auto model = build("c2f2-bn", 16, 1);
  model->train();
  engine::Generator gen(3);
  Tensor images = engine::uniform({5, 1, 28, 28}, 0.0, 1.0, gen);
  Tensor whole = models::embed_batch(*model, images);
  CHECK(model->is_training());  // restored
  CHECK(whole.shape() == engine::Shape{5, 16});
  CHECK(whole.dtype() == engine::DType::F32);
  std::vector<int64_t> seen;
  models::EmbedOptions options;
  options.batch_size = 2;
  options.progress = [&](int64_t done, int64_t total) {
    CHECK(total == 5);
    seen.push_back(done);
  };
  Tensor batched = models::embed(*model, images, options);
  CHECK(seen == std::vector<int64_t>{2, 4, 5});
  // Eval-mode BN (running stats 0 / 1 here) makes each row independent of its batch mates.
  test::require_close(batched, whole, 1e-6, 1e-5, "batched");
  // Eval mode never touched the running statistics.
  test::require_close(model->state_dict().at("bn1.running_mean"), std::vector<double>(32, 0.0), 0,
                      0, "running_mean");
}

TEST_CASE("embed: input shape and pixel range are checked", "[models]") {
  auto model = build("c2f2", 4);
  REQUIRE_THROWS_WITH(models::embed_batch(*model, Tensor::zeros({2, 3, 28, 28})),
                      Catch::Contains("c2f2") && Catch::Contains("[N, 1, 28, 28]") &&
                          Catch::Contains("[2, 3, 28, 28]"));
  REQUIRE_THROWS_WITH(models::embed_batch(*model, Tensor::zeros({1, 28, 28})),
                      Catch::Contains("[N, 1, 28, 28]"));
  auto resnet = build("resnet18", 4, 1, false, false);
  REQUIRE_THROWS_WITH(models::embed_batch(*resnet, Tensor::zeros({1, 1, 32, 32})),
                      Catch::Contains("resnet18") && Catch::Contains("[N, 3, *, *]"));
  REQUIRE_NOTHROW(models::check_pixels(Tensor::from_vector({0, 0.5, 1}, {3}), "x"));
  REQUIRE_THROWS_WITH(models::check_pixels(Tensor::from_vector({0, 0.5, 200}, {3}), "imgs.npy"),
                      Catch::Contains("imgs.npy") && Catch::Contains("element 2") &&
                          Catch::Contains("divide by 255"));
  REQUIRE_THROWS_WITH(models::check_pixels(Tensor::from_vector({NAN, 0.5}, {2}), "x"),
                      Catch::Contains("element 0"));
  REQUIRE_THROWS_WITH(models::check_pixels(Tensor::from_vector({-0.1}, {1}), "x"),
                      Catch::Contains("[0, 1]"));
}
