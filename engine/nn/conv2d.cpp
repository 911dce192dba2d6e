// Conv2d layer: parameters and the call into engine::conv2d.
#include "engine/nn/conv2d.h"

#include "engine/nn/init.h"

namespace engine::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
               int64_t padding, int64_t dilation, bool bias, Generator& gen) {
  ENGINE_CHECK(in_channels > 0 && out_channels > 0 && kernel_size > 0,
               "Conv2d: channels and kernel size must be positive, got in ", in_channels, ", out ",
               out_channels, ", kernel ", kernel_size);
  ENGINE_CHECK(stride > 0 && dilation > 0 && padding >= 0, "Conv2d: invalid stride ", stride,
               ", padding ", padding, " or dilation ", dilation);
  options_.stride_h = options_.stride_w = stride;
  options_.pad_h = options_.pad_w = padding;
  options_.dilation_h = options_.dilation_w = dilation;
  weight_ = register_parameter(
      "weight", Tensor::empty({out_channels, in_channels, kernel_size, kernel_size}));
  if (bias) bias_ = register_parameter("bias", Tensor::empty({out_channels}));
  init::linear_default_(weight_, bias_, gen);
}

Tensor Conv2d::forward(const Tensor& x) { return conv2d(x, weight_, bias_, options_); }

}  // namespace engine::nn
