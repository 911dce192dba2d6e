// The two-rings problem shared by tools/mlp_demo.cpp and tests/nn/mlp_test.cpp: two concentric
// noisy rings from a seeded Philox stream, and the accuracy of a 2-class model on them.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/autograd.h"
#include "engine/nn/module.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace mlp_rings {

struct Dataset {
  engine::Tensor points;  // [N, 2]
  engine::Tensor labels;  // I64 [N]
};

// Class c: radius 1 + c (plus N(0, 0.1) noise) at a uniform angle; classes alternate.
inline Dataset make_rings(int64_t per_class, engine::Generator& gen) {
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
  return {engine::Tensor::from_vector(points, {2 * per_class, 2}),
          engine::Tensor::from_indices(labels, {2 * per_class})};
}

// Fraction of points whose larger logit is their label.
inline double accuracy(engine::nn::Module& model, const Dataset& data) {
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

}  // namespace mlp_rings
