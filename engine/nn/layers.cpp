// Parameter-free layers: each forward is one op.
#include "engine/nn/layers.h"

namespace engine::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

Tensor Flatten::forward(const Tensor& x) { return x.flatten(start_dim_, end_dim_); }

Pool2dOptions pool2d_options(int64_t kernel_size, std::optional<int64_t> stride, int64_t padding) {
  int64_t s = stride.value_or(kernel_size);
  ENGINE_CHECK(kernel_size > 0 && s > 0 && padding >= 0, "pool2d: invalid kernel ", kernel_size,
               ", stride ", s, " or padding ", padding);
  Pool2dOptions options;
  options.kernel_h = options.kernel_w = kernel_size;
  options.stride_h = options.stride_w = s;
  options.pad_h = options.pad_w = padding;
  return options;
}

Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, options_); }

Tensor AvgPool2d::forward(const Tensor& x) { return avg_pool2d(x, options_); }

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return adaptive_avg_pool2d(x); }

Dropout::Dropout(double p, Generator* gen) : p_(p), gen_(gen) {
  ENGINE_CHECK(p >= 0.0 && p < 1.0, "Dropout: probability must be in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  Generator& gen = gen_ != nullptr ? *gen_ : default_generator();
  return dropout(x, p_, is_training(), gen);
}

}  // namespace engine::nn
