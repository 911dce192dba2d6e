// ResNets as torchvision builds them (layer tables, names and initialization in resnet.h).
#include "models/resnet.h"

#include <cmath>
#include <string>

#include "engine/ops.h"
#include "kernels/common/check.h"

namespace models {

namespace nn = engine::nn;
using engine::Tensor;

namespace {

// A bias-free conv with torchvision's kaiming_normal(fan_out, relu) weights:
// std = gain / sqrt(fan_out) = sqrt(2) / sqrt(out_channels * k * k).
std::shared_ptr<nn::Conv2d> make_conv(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                      int64_t padding, const ResNetOptions& options,
                                      engine::Generator& gen) {
  if (!options.init_weights) {
    return std::make_shared<nn::Conv2d>(in, out, kernel, stride, padding, 1, false, gen);
  }
  // nn::Conv2d always applies PyTorch's default init; draw that from a scratch stream so `gen`
  // feeds only the values that survive.
  engine::Generator scratch(0);
  auto conv = std::make_shared<nn::Conv2d>(in, out, kernel, stride, padding, 1, false, scratch);
  double fan_out = static_cast<double>(out * kernel * kernel);
  nn::init::normal_(conv->weight(), 0.0, std::sqrt(2.0 / fan_out), gen);
  return conv;
}

std::shared_ptr<nn::BatchNorm2d> make_bn(int64_t channels, int64_t branches) {
  return std::make_shared<nn::BatchNorm2d>(channels, branches, 1e-5, 0.1);
}

// torchvision's _make_layer: a 1x1 strided conv + BN when the shortcut changes shape.
std::shared_ptr<nn::Sequential> make_downsample(int64_t in, int64_t out, int64_t stride,
                                                const ResNetOptions& options,
                                                engine::Generator& gen) {
  if (stride == 1 && in == out) return nullptr;
  auto downsample = std::make_shared<nn::Sequential>();
  downsample->push_back(make_conv(in, out, 1, stride, 0, options, gen));
  downsample->push_back(make_bn(out, options.bn_branches));
  return downsample;
}

}  // namespace

ResNetLayout resnet_layout(int64_t depth) {
  switch (depth) {
    case 18:
      return {{2, 2, 2, 2}, false};
    case 34:
      return {{3, 4, 6, 3}, false};
    case 50:
      return {{3, 4, 6, 3}, true};
    case 101:
      return {{3, 4, 23, 3}, true};
    case 152:
      return {{3, 8, 36, 3}, true};
    default:
      engine::fail("resnet: unsupported depth ", depth, " (18, 34, 50, 101 or 152)");
  }
}

// ---- blocks ----------------------------------------------------------------------------------

BasicBlock::BasicBlock(int64_t in_channels, int64_t width, int64_t stride,
                       const ResNetOptions& options, engine::Generator& gen) {
  // torchvision's registration order: conv1, bn1, relu, conv2, bn2, downsample.
  conv1_ = register_module("conv1", make_conv(in_channels, width, 3, stride, 1, options, gen));
  bn1_ = register_module("bn1", make_bn(width, options.bn_branches));
  relu_ = register_module("relu", std::make_shared<nn::ReLU>());
  conv2_ = register_module("conv2", make_conv(width, width, 3, 1, 1, options, gen));
  bn2_ = register_module("bn2", make_bn(width, options.bn_branches));
  auto downsample = make_downsample(in_channels, width * kExpansion, stride, options, gen);
  if (downsample) downsample_ = register_module("downsample", downsample);
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor out = relu_->forward(bn1_->forward(conv1_->forward(x)));
  out = bn2_->forward(conv2_->forward(out));
  Tensor shortcut = downsample_ ? downsample_->forward(x) : x;
  return relu_->forward(out + shortcut);
}

Bottleneck::Bottleneck(int64_t in_channels, int64_t width, int64_t stride,
                       const ResNetOptions& options, engine::Generator& gen) {
  // torchvision's registration order: conv1, bn1, conv2, bn2, conv3, bn3, relu, downsample.
  conv1_ = register_module("conv1", make_conv(in_channels, width, 1, 1, 0, options, gen));
  bn1_ = register_module("bn1", make_bn(width, options.bn_branches));
  conv2_ = register_module("conv2", make_conv(width, width, 3, stride, 1, options, gen));
  bn2_ = register_module("bn2", make_bn(width, options.bn_branches));
  conv3_ = register_module("conv3", make_conv(width, width * kExpansion, 1, 1, 0, options, gen));
  bn3_ = register_module("bn3", make_bn(width * kExpansion, options.bn_branches));
  relu_ = register_module("relu", std::make_shared<nn::ReLU>());
  auto downsample = make_downsample(in_channels, width * kExpansion, stride, options, gen);
  if (downsample) downsample_ = register_module("downsample", downsample);
}

Tensor Bottleneck::forward(const Tensor& x) {
  Tensor out = relu_->forward(bn1_->forward(conv1_->forward(x)));
  out = relu_->forward(bn2_->forward(conv2_->forward(out)));
  out = bn3_->forward(conv3_->forward(out));
  Tensor shortcut = downsample_ ? downsample_->forward(x) : x;
  return relu_->forward(out + shortcut);
}

// ---- the network -----------------------------------------------------------------------------

ResNet::ResNet(const ResNetOptions& options, engine::Generator& gen)
    : Model("resnet" + std::to_string(options.depth), options.embedding_dim, options.bn_branches,
            {3, 0, 0}),
      depth_(options.depth) {
  const ResNetLayout layout = resnet_layout(options.depth);
  const std::string name = "resnet" + std::to_string(options.depth);
  ENGINE_CHECK(options.embedding_dim > 0, name, ": embedding_dim must be positive, got ",
               options.embedding_dim);
  ENGINE_CHECK(options.bn_branches >= 1, name, ": bn_branches must be >= 1, got ",
               options.bn_branches);
  const int64_t k = options.bn_branches;
  const int64_t expansion = layout.bottleneck ? Bottleneck::kExpansion : BasicBlock::kExpansion;

  conv1_ = register_module("conv1", make_conv(3, 64, 7, 2, 3, options, gen));
  bn1_ = register_module("bn1", make_bn(64, k));
  relu_ = register_module("relu", std::make_shared<nn::ReLU>());
  maxpool_ = register_module("maxpool", std::make_shared<nn::MaxPool2d>(3, 2, 1));
  int64_t in_channels = 64;
  for (size_t stage = 0; stage < 4; ++stage) {
    const int64_t width = int64_t{64} << stage;  // 64, 128, 256, 512
    auto layer = std::make_shared<nn::Sequential>();
    for (int64_t b = 0; b < layout.blocks[stage]; ++b) {
      const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      if (layout.bottleneck) {
        layer->push_back(std::make_shared<Bottleneck>(in_channels, width, stride, options, gen));
      } else {
        layer->push_back(std::make_shared<BasicBlock>(in_channels, width, stride, options, gen));
      }
      in_channels = width * expansion;
    }
    layers_.push_back(register_module("layer" + std::to_string(stage + 1), layer));
  }
  feature_dim_ = in_channels;
  avgpool_ = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>());
  fc_ = register_module(
      "fc", std::make_shared<nn::Linear>(feature_dim_, options.embedding_dim, true, gen));
  if (options.frozen_bn) nn::set_batch_norm_frozen(*this, true);
}

Tensor ResNet::normalize(const Tensor& x) {
  Tensor mean = Tensor::from_vector({kImageNetMean[0], kImageNetMean[1], kImageNetMean[2]},
                                    {1, 3, 1, 1}, x.dtype(), x.device());
  Tensor stddev = Tensor::from_vector({kImageNetStd[0], kImageNetStd[1], kImageNetStd[2]},
                                      {1, 3, 1, 1}, x.dtype(), x.device());
  return (x - mean) / stddev;
}

Tensor ResNet::forward(const Tensor& x) {
  check_input(x);
  Tensor h = normalize(x);
  h = maxpool_->forward(relu_->forward(bn1_->forward(conv1_->forward(h))));
  for (const auto& layer : layers_) h = layer->forward(h);
  h = avgpool_->forward(h).flatten(1);
  return fc_->forward(h);
}

}  // namespace models
