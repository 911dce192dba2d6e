// Layers without parameters: activation, reshaping, pooling and dropout. Each wraps one op of
// engine/ops.h; they exist so models can be written as trees of modules (Sequential, named
// children) with PyTorch's names and train/eval behaviour.
#pragma once

#include <optional>

#include "engine/nn/module.h"
#include "engine/ops.h"
#include "engine/random.h"

namespace engine::nn {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

// Flattens dims [start_dim, end_dim] into one (PyTorch's nn.Flatten: start_dim = 1).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_dim_(start_dim), end_dim_(end_dim) {}
  Tensor forward(const Tensor& x) override;

 private:
  int64_t start_dim_;
  int64_t end_dim_;
};

// Square window; stride defaults to the kernel size (as in PyTorch).
Pool2dOptions pool2d_options(int64_t kernel_size, std::optional<int64_t> stride, int64_t padding);

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                     int64_t padding = 0)
      : options_(pool2d_options(kernel_size, stride, padding)) {}
  explicit MaxPool2d(const Pool2dOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  const Pool2dOptions& options() const { return options_; }

 private:
  Pool2dOptions options_;
};

// Padded cells count in the divisor (count_include_pad = true, PyTorch's default).
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                     int64_t padding = 0)
      : options_(pool2d_options(kernel_size, stride, padding)) {}
  explicit AvgPool2d(const Pool2dOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  const Pool2dOptions& options() const { return options_; }

 private:
  Pool2dOptions options_;
};

// Global average pool to 1x1: [N, C, H, W] -> [N, C, 1, 1] (the only output size supported).
class AdaptiveAvgPool2d : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

// Zeroes each element with probability p in training (survivors scaled by 1/(1-p)); identity in
// eval. Draws from `gen` if given (it must outlive the module), else engine::default_generator().
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  double p() const { return p_; }

 private:
  double p_;
  Generator* gen_;
};

}  // namespace engine::nn
