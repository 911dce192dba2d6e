// conv2d's validation and backward, shared with the ops that end or begin with a convolution
// (conv2d_pool_relu.cpp), so there is one definition of each.
#pragma once

#include <vector>

#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/conv2d/conv2d.h"

namespace engine::detail {

// Validates x [N, C, H, W], weight [K, C, R, S], bias [K] or undefined and the options; returns
// the kernel geometry. Every message names conv2d and the shapes involved.
kernels::Conv2dShape conv2d_shape(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                  const Conv2dOptions& options);

// dx, dw, db (as `needs` asks; db only when has_bias) of a conv whose output gradient is
// grad_output [N, K, P, Q], from the saved contiguous input and weight; on CUDA through
// engine::conv_backend()'s kernels, on the CPU through the im2col path.
std::vector<Tensor> conv2d_backward(const kernels::Conv2dShape& shape, const Tensor& grad_output,
                                    const Tensor& x_saved, const Tensor& w_saved, bool has_bias,
                                    const std::vector<bool>& needs);

}  // namespace engine::detail
