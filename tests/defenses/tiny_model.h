// Small models and SPC-2 batches for the defense tests: a recipe runs its adversary (dozens of
// forward/backward passes) on every batch, so the tests need a network that costs microseconds.
#pragma once

#include <memory>
#include <vector>

#include "engine/nn/batch_norm.h"
#include "engine/nn/linear.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "models/model.h"

namespace defense_test {

// 1x4x4 images -> D = 4: Linear(16 -> 4), then (with bn_branches >= 1) a K-branch BatchNorm1d,
// so AdvProp-D / MDProp can route rows to branches. Smooth, so sign-gradient PGD behaves
// predictably.
class TinyEmbedder : public models::Model {
 public:
  TinyEmbedder(engine::Generator& gen, int64_t bn_branches = 0,
               engine::DType dtype = engine::DType::F64)
      : Model("tiny", 4, bn_branches > 0 ? bn_branches : 1, {1, 4, 4}) {
    fc_ = register_module("fc", std::make_shared<engine::nn::Linear>(16, 4, true, gen));
    if (bn_branches > 0) {
      bn_ = register_module("bn", std::make_shared<engine::nn::BatchNorm1d>(4, bn_branches));
    }
    to(dtype);
  }
  engine::Tensor forward(const engine::Tensor& x) override {
    engine::Tensor h = fc_->forward(x.flatten(1));
    return bn_ ? bn_->forward(h) : h;
  }

 private:
  std::shared_ptr<engine::nn::Linear> fc_;
  std::shared_ptr<engine::nn::BatchNorm1d> bn_;
};

// An SPC-2 batch of `pairs` pairs [a0, p0, a1, p1, ...] over `classes` classes (pair i has class
// i % classes), pixels uniform in [0.2, 0.8] (room to move both ways under small eps) plus a
// class-dependent offset so classes are separable.
struct Spc2Batch {
  engine::Tensor images;  // [2 * pairs, 1, 4, 4]
  engine::Tensor labels;  // I64 [2 * pairs]
};

inline Spc2Batch make_spc2_batch(int64_t pairs, int64_t classes, engine::Generator& gen,
                                 engine::DType dtype = engine::DType::F64) {
  const int64_t n = 2 * pairs;
  std::vector<double> pixels =
      engine::uniform({n, 1, 4, 4}, 0.0, 1.0, gen, engine::DType::F64).to_vector();
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) {
    labels[i] = (i / 2) % classes;
    for (int64_t k = 0; k < 16; ++k) {
      const double offset = (k % classes == labels[i]) ? 0.1 : 0.0;
      pixels[i * 16 + k] = 0.2 + 0.5 * pixels[i * 16 + k] + offset;
    }
  }
  return {engine::Tensor::from_vector(pixels, {n, 1, 4, 4}, dtype),
          engine::Tensor::from_indices(labels, {n})};
}

}  // namespace defense_test
