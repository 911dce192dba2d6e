// C2F2: the small convolutional embedding network of the robust-ranking papers for 28x28
// grayscale images (MNIST, Fashion-MNIST), robrank's `rc2f2` (robrank models/template_rank.py):
//
//   x [N, 1, 28, 28] in [0, 1] (no mean/std normalization)
//   conv1  Conv2d 1 -> 32, 5x5, pad 2     [N, 32, 28, 28]   ReLU, MaxPool 2x2  -> [N, 32, 14, 14]
//   conv2  Conv2d 32 -> 64, 5x5, pad 2    [N, 64, 14, 14]   ReLU, MaxPool 2x2  -> [N, 64, 7, 7]
//   flatten in (C, H, W) order            [N, 3136]
//   fc1    Linear 3136 -> 1024            ReLU
//   fc2    Linear 1024 -> D               the embedding, no activation, no normalization
//
// Parameters (D = 512): conv1 32*25 + 32 = 832, conv2 64*32*25 + 64 = 51,264,
// fc1 3136*1024 + 1024 = 3,212,288, fc2 1024*512 + 512 = 524,800; total 3,789,184.
// PyTorch-default initialization (kaiming-uniform a = sqrt(5), bias U(+-1/sqrt(fan_in))).
//
// Module names (the `dml info` tree), in the papers' layer order: conv1, relu1, pool1, conv2,
// relu2, pool2, flatten, fc1, relu3, fc2; only conv1/conv2/fc1/fc2 hold parameters (robrank's
// state keys). forward() runs each pool before its ReLU: the same function, a quarter of the ReLU.
// With engine::fused_kernels() (ENGINE_FUSED=1), plain C2F2 runs each conv -> pool -> ReLU as one
// fused op, engine::conv2d_pool_relu (the same bits on CUDA).
//
// C2F2-BN (batch_norm = true) inserts a K-branch batch norm right after each linear map, before
// its ReLU, so MDProp / AdvProp-D run on Fashion-MNIST on a CPU:
//   conv1 -> bn1 (BatchNorm2d 32) -> ReLU -> pool;  conv2 -> bn2 (BatchNorm2d 64) -> ReLU -> pool;
//   fc1 -> bn3 (BatchNorm1d 1024) -> ReLU;  fc2.
// The convs and fc1 keep their biases (redundant before BN, but then every C2F2 key keeps its
// name and shape in C2F2-BN); the BNs add 2 * (32 + 64 + 1024) = 2,240 parameters per branch.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/nn/nn.h"
#include "engine/random.h"
#include "models/model.h"

namespace models {

struct C2F2Options {
  int64_t embedding_dim = 512;
  bool batch_norm = false;  // C2F2-BN
  int64_t bn_branches = 1;  // K (C2F2-BN only)
  bool frozen_bn = false;   // eval-mode BN while training (C2F2-BN only)
};

class C2F2 : public Model {
 public:
  explicit C2F2(const C2F2Options& options = {},
                engine::Generator& gen = engine::default_generator());

  engine::Tensor forward(const engine::Tensor& x) override;

  const engine::nn::Conv2d& conv1() const { return *conv1_; }
  const engine::nn::Conv2d& conv2() const { return *conv2_; }
  const engine::nn::Linear& fc1() const { return *fc1_; }
  const engine::nn::Linear& fc2() const { return *fc2_; }

 private:
  engine::Tensor forward_fused(const engine::Tensor& x);

  std::shared_ptr<engine::nn::Conv2d> conv1_, conv2_;
  std::shared_ptr<engine::nn::Linear> fc1_, fc2_;
  // Null in plain C2F2.
  std::shared_ptr<engine::nn::BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<engine::nn::BatchNorm1d> bn3_;
  std::shared_ptr<engine::nn::ReLU> relu1_, relu2_, relu3_;
  std::shared_ptr<engine::nn::MaxPool2d> pool1_, pool2_;
  std::shared_ptr<engine::nn::Flatten> flatten_;
};

}  // namespace models
