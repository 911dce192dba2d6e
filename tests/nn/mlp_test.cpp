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

using engine::Tensor;
namespace nn = engine::nn;

namespace {

struct Dataset {
  Tensor points;  // [N, 2]
  Tensor labels;  // I64 [N]
};

// Class c: radius 1 + c (plus N(0, 0.1) noise) at a uniform angle; classes alternate.
Dataset make_rings(int64_t per_class, engine::Generator& gen) {
  const double two_pi = 6.283185307179586;
  std::vector<double> angle = engine::uniform({2 * per_class}, 0.0, two_pi, gen).to_vector();
  std::vector<double> noise = engine::normal({2 * per_class}, 0.0, 0.1, gen).to_vector();
  std::vector<double> points;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < 2 * per_class; ++i) {
    int64_t label = i % 2;
    double radius = 1.0 + double(label) + noise[i];
    points.push_back(radius * std::cos(angle[i]));
    points.push_back(radius * std::sin(angle[i]));
    labels.push_back(label);
  }
  return {Tensor::from_vector(points, {2 * per_class, 2}),
          Tensor::from_indices(labels, {2 * per_class})};
}

double accuracy(nn::Module& model, const Dataset& data) {
  engine::NoGradGuard no_grad;
  std::vector<double> logits = model(data.points).to_vector();
  std::vector<int64_t> labels = data.labels.to_indices();
  int64_t correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    int64_t predicted = logits[2 * i + 1] > logits[2 * i] ? 1 : 0;
    correct += predicted == labels[i];
  }
  return double(correct) / double(labels.size());
}

}  // namespace

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
