// 2-D convolution layer, NCHW: x [N, C, H, W] * weight [K, C, R, S] (+ bias [K]) -> [N, K, P, Q].
// Square kernel, stride, padding and dilation, no groups (the models need none). Parameters
// "weight" and "bias" (if bias), PyTorch-default initialized (init.h) with fan_in = C R S.
#pragma once

#include "engine/nn/module.h"
#include "engine/ops.h"
#include "engine/random.h"

namespace engine::nn {

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, int64_t dilation = 1, bool bias = true,
         Generator& gen = default_generator());

  Tensor forward(const Tensor& x) override;

  const Conv2dOptions& options() const { return options_; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias

 private:
  Conv2dOptions options_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace engine::nn
