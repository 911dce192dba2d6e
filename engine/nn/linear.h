// Linear (fully connected) layer: y = x W^T + b, x [N, in], W [out, in], b [out].
// Parameters "weight" and "bias" (if bias), PyTorch-default initialized (init.h).
#pragma once

#include "engine/nn/module.h"
#include "engine/random.h"

namespace engine::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true,
         Generator& gen = default_generator());

  Tensor forward(const Tensor& x) override;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias

 private:
  int64_t in_features_;
  int64_t out_features_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace engine::nn
