// Whole models on the CPU give the same bits on any number of OpenMP threads (docs/build.md,
// "CPU threads"): one training-mode forward and backward of a ResNet, with batch statistics, the
// running-statistics update, every weight gradient and the input gradient. The kernels have their
// own 1-vs-4-thread tests; these cover what only a whole network has: strided 7x7 and 3x3
// convolutions, 1x1 downsample and bottleneck convolutions, the padded 3x3 max-pool, BN, the
// residual adds and the adaptive average pool, composed as the trainer runs them.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "models/registry.h"

using engine::Tensor;

namespace {

// Everything one training-mode pass produces, by name, as host copies (float to double is exact).
using Results = std::map<std::string, std::vector<double>>;

Results train_pass(const std::string& name, const engine::Shape& input_shape, int threads) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  models::ModelConfig config;
  config.name = name;
  config.embedding_dim = 16;
  engine::Generator gen(41);
  auto model = models::build_model(config, gen);
  model->train();
  Tensor x = engine::uniform(input_shape, 0.0, 1.0, gen);
  x.set_requires_grad(true);
  Tensor w = engine::uniform({input_shape[0], 16}, -1.0, 1.0, gen);
  Tensor embedding = model->forward(x);
  engine::backward(engine::sum(embedding * w));
  omp_set_num_threads(saved);

  Results out;
  out["embedding"] = embedding.to_vector();
  out["input.grad"] = x.grad().to_vector();
  for (const auto& [key, parameter] : model->named_parameters())
    out[key + ".grad"] = parameter.grad().to_vector();
  for (const auto& [key, state] : model->state_dict()) out[key] = state.to_vector();
  return out;
}

// The names whose values differ in any bit (memcmp: -0 and +0 differ, as they do in a file).
std::vector<std::string> differing(const Results& a, const Results& b) {
  std::vector<std::string> names;
  for (const auto& [key, values] : a) {
    const auto other = b.find(key);
    if (other == b.end() || other->second.size() != values.size() ||
        std::memcmp(values.data(), other->second.data(), values.size() * sizeof(double)) != 0)
      names.push_back(key);
  }
  return names;
}

}  // namespace

TEST_CASE("resnet18 training pass: the same bits on 1 and 4 threads", "[models][threads]") {
  // 6 images of 64 x 64: every convolution is large enough for the OpenMP paths.
  const Results one = train_pass("resnet18", {6, 3, 64, 64}, 1);
  const Results four = train_pass("resnet18", {6, 3, 64, 64}, 4);
  REQUIRE(one.size() == four.size());
  REQUIRE(one.count("layer2.0.downsample.1.running_mean") == 1);  // the stats are compared too
  CHECK(differing(one, four) == std::vector<std::string>{});
}

TEST_CASE("resnet50 training pass: the same bits on 1 and 4 threads", "[models][threads]") {
  const Results one = train_pass("resnet50", {2, 3, 64, 64}, 1);
  const Results four = train_pass("resnet50", {2, 3, 64, 64}, 4);
  REQUIRE(one.size() == four.size());
  CHECK(differing(one, four) == std::vector<std::string>{});
}
