// Acceptance test: a two-layer MLP (2 -> 32 -> 2, ReLU) trained with Adam and cross-entropy on
// two concentric noisy rings reaches >= 99% training accuracy in a few seconds. The same problem
// is tools/mlp_demo.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "engine/autograd.h"
#include "engine/nn/nn.h"
#include "engine/ops.h"
#include "engine/optim/adam.h"
#include "engine/random.h"
#include "tools/mlp_rings.h"

using engine::Tensor;
namespace nn = engine::nn;

using mlp_rings::accuracy;
using mlp_rings::Dataset;
using mlp_rings::make_rings;

TEST_CASE("mlp: Adam trains a 2-32-2 MLP to >= 99% on two rings", "[mlp][adam][acceptance]") {
  engine::Generator gen(2024);
  Dataset data = make_rings(200, gen);
  nn::Sequential model;
  model.push_back(std::make_shared<nn::Linear>(2, 32, true, gen));
  model.push_back(std::make_shared<nn::ReLU>());
  model.push_back(std::make_shared<nn::Linear>(32, 2, true, gen));
  engine::optim::AdamOptions options;
  options.lr = 0.01;
  engine::optim::Adam adam(model.parameters(), options);

  const int64_t batch = 40;
  const int64_t n = data.labels.numel();
  double first_loss = 0, last_loss = 0;
  for (int epoch = 0; epoch < 60; ++epoch) {
    Tensor order = engine::permutation(n, gen);
    double epoch_loss = 0;
    for (int64_t start = 0; start < n; start += batch) {
      Tensor rows = order.slice(0, start, start + batch);
      Tensor loss = engine::cross_entropy(model(engine::index_select(data.points, rows)),
                                          engine::index_select(data.labels, rows));
      adam.zero_grad();
      engine::backward(loss);
      adam.step();
      epoch_loss += loss.item() * double(batch) / double(n);
    }
    if (epoch == 0) first_loss = epoch_loss;
    last_loss = epoch_loss;
  }
  INFO("loss " << first_loss << " -> " << last_loss);
  CHECK(last_loss < first_loss);
  REQUIRE(accuracy(model, data) >= 0.99);
}
