// linear's validation and backward, shared with the ops that start with a linear layer
// (linear_fused.cpp), so there is one definition of each.
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace engine::detail {

// x [m, k], weight [n, k], bias [n] or undefined, one device and dtype; messages name linear.
void check_linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
// A contiguous copy (or the tensor itself) without autograd history: the op records its own node
// on the original inputs, so the copy must not record a second one.
Tensor dense(const Tensor& t);
// dx = dy W, dW = dy^T x, db = column sums of dy, each only where `needs` asks, from
// grad = dy [m, n] and the saved dense x and W; on CUDA through engine::gemm_backend()'s GEMM.
std::vector<Tensor> linear_backward(const Tensor& grad, const Tensor& x_dense,
                                    const Tensor& w_dense, const std::vector<bool>& needs);

}  // namespace engine::detail
