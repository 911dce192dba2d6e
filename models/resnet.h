// ResNet-18/34/50/101/152 exactly as torchvision builds them (torchvision/models/resnet.py,
// research/ecosystem.md §6.2), with `fc` replaced by Linear(C -> D) and ImageNet mean/std
// normalization inside forward (robrank's `rres18`/`rres50`, robrank models/template_rank.py):
//
//   x [N, 3, H, W] in [0, 1]  ->  (x - mean) / std,  mean (0.485, 0.456, 0.406), std (0.229, 0.224,
//   0.225) conv1    Conv2d 3 -> 64, 7x7, stride 2, pad 3, no bias       [N, 64, H/2, W/2] bn1,
//   relu, maxpool 3x3 stride 2 pad 1                        [N, 64, H/4, W/4] layer1   blocks of
//   width 64,  stride 1                       [N, 64 e, H/4, W/4] layer2   blocks of width 128,
//   first block stride 2           [N, 128 e, H/8, W/8] layer3   blocks of width 256, first block
//   stride 2           [N, 256 e, H/16, W/16] layer4   blocks of width 512, first block stride 2
//   [N, 512 e, H/32, W/32] avgpool  global average -> [N, 512 e, 1, 1], flatten -> [N, 512 e] fc
//   Linear 512 e -> D                                   the embedding (no L2 norm)
//
//   depth   block        blocks per stage   expansion e   parameters with D = 1000 (torchvision)
//   18      BasicBlock   2, 2, 2, 2         1             11,689,512
//   34      BasicBlock   3, 4, 6, 3         1             21,797,672
//   50      Bottleneck   3, 4, 6, 3         4             25,557,032
//   101     Bottleneck   3, 4, 23, 3        4             44,549,160
//   152     Bottleneck   3, 8, 36, 3        4             60,192,808
//
// BasicBlock(in, w, stride):  conv1 3x3/stride (in -> w), bn1, relu, conv2 3x3 (w -> w), bn2;
//   out = relu(bn2(conv2(relu(bn1(conv1 x)))) + shortcut(x)).
// Bottleneck(in, w, stride) (torchvision's "ResNet V1.5": the stride sits on the 3x3 conv):
//   conv1 1x1 (in -> w), bn1, conv2 3x3/stride (w -> w), bn2, conv3 1x1 (w -> 4w), bn3, relu.
// shortcut = identity, or `downsample` = Sequential(0: Conv2d 1x1/stride no bias, 1: BatchNorm2d)
// when the stride is not 1 or the channel count changes (torchvision's _make_layer rule: layer2-4
// for BasicBlock nets, layer1-4 for Bottleneck nets, first block only).
//
// Module names, registration order (hence state_dict key order) and shapes are torchvision's, so
// the state dict keys are exactly torchvision's (plus `<bn>.aux_bn.<k-1>.*` when K > 1).
// Initialization as torchvision: convs kaiming_normal(mode = fan_out, relu), i.e.
// N(0, sqrt(2 / (out_channels * kh * kw))); BN weight 1, bias 0; fc PyTorch's Linear default.
// Every BN has eps 1e-5, momentum 0.1 and K branches (aux branches start as copies of branch 0);
// frozen_bn makes every BN use its running statistics even while training (robrank's freeze_bn).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/nn/nn.h"
#include "engine/random.h"
#include "models/model.h"

namespace models {

struct ResNetOptions {
  int64_t depth = 18;  // 18, 34, 50, 101 or 152
  int64_t embedding_dim = 512;
  int64_t bn_branches = 1;
  bool frozen_bn = false;
  // false: skip torchvision's kaiming-normal conv init and keep nn::Conv2d's PyTorch default,
  // which halves the build time; for callers that load weights right away (dml embed/info).
  bool init_weights = true;
};

// ImageNet statistics the model normalizes its [0, 1] input with.
inline constexpr double kImageNetMean[3] = {0.485, 0.456, 0.406};
inline constexpr double kImageNetStd[3] = {0.229, 0.224, 0.225};

class BasicBlock : public engine::nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t in_channels, int64_t width, int64_t stride, const ResNetOptions& options,
             engine::Generator& gen);
  engine::Tensor forward(const engine::Tensor& x) override;

 private:
  std::shared_ptr<engine::nn::Conv2d> conv1_, conv2_;
  std::shared_ptr<engine::nn::BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<engine::nn::ReLU> relu_;
  std::shared_ptr<engine::nn::Sequential> downsample_;  // null: identity shortcut
};

class Bottleneck : public engine::nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t in_channels, int64_t width, int64_t stride, const ResNetOptions& options,
             engine::Generator& gen);
  engine::Tensor forward(const engine::Tensor& x) override;

 private:
  std::shared_ptr<engine::nn::Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<engine::nn::BatchNorm2d> bn1_, bn2_, bn3_;
  std::shared_ptr<engine::nn::ReLU> relu_;
  std::shared_ptr<engine::nn::Sequential> downsample_;
};

class ResNet : public Model {
 public:
  explicit ResNet(const ResNetOptions& options,
                  engine::Generator& gen = engine::default_generator());

  engine::Tensor forward(const engine::Tensor& x) override;
  // The [0, 1] -> ImageNet-normalized step alone (differentiable; attacks work in pixel space).
  static engine::Tensor normalize(const engine::Tensor& x);

  int64_t depth() const { return depth_; }
  int64_t feature_dim() const { return feature_dim_; }  // 512 e, the input width of fc

 private:
  int64_t depth_;
  int64_t feature_dim_;
  std::shared_ptr<engine::nn::Conv2d> conv1_;
  std::shared_ptr<engine::nn::BatchNorm2d> bn1_;
  std::shared_ptr<engine::nn::ReLU> relu_;
  std::shared_ptr<engine::nn::MaxPool2d> maxpool_;
  std::vector<std::shared_ptr<engine::nn::Sequential>> layers_;  // layer1..layer4
  std::shared_ptr<engine::nn::AdaptiveAvgPool2d> avgpool_;
  std::shared_ptr<engine::nn::Linear> fc_;
};

// Blocks per stage and whether the net uses Bottleneck blocks; error for an unknown depth.
struct ResNetLayout {
  std::vector<int64_t> blocks;
  bool bottleneck = false;
};
ResNetLayout resnet_layout(int64_t depth);

}  // namespace models
