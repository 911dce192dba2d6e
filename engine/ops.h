// Every operator of the engine, as functions on tensors.
//
// Each op: validates shapes/dtypes/devices with a message naming the op and the shapes, allocates
// its output, dispatches to kernels/<op>/<op>_cpu.cpp (f32/f64) or <op>_cuda.cu (f32) by the
// inputs' device, and — when autograd is recording — registers its backward, which is defined
// right below the forward in engine/ops/<op>.cpp. All inputs of one op must share device and
// dtype (index tensors are I64).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/random.h"
#include "engine/tensor.h"

namespace engine {

// ---- elementwise, with NumPy broadcasting (engine/ops/binary.cpp) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// Sums `grad` over broadcast dimensions so it has `shape` (the backward of broadcasting).
Tensor sum_to_shape(const Tensor& grad, const Shape& shape);

// ---- scalar and unary (engine/ops/unary.cpp) ----
Tensor add_scalar(const Tensor& x, double value);
Tensor mul_scalar(const Tensor& x, double value);
Tensor neg(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);  // gradient zero everywhere
// Gradient passes where low <= x <= high, zero outside (PyTorch's convention).
Tensor clamp(const Tensor& x, double low, double high);

// ---- reductions (engine/ops/reduce.cpp) ----
Tensor sum(const Tensor& x);  // all elements -> shape []
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim = false);

// ---- softmax and cross-entropy (engine/ops/softmax.cpp) ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// Mean over rows of -log softmax(logits)[i, labels[i]]; logits [N, C], labels I64 [N].
Tensor cross_entropy(const Tensor& logits, const Tensor& labels);

// ---- shape (engine/ops/view.cpp, concat.cpp, index_select.cpp) ----
// Tensor methods reshape/view/flatten/slice/select/transpose/expand/unsqueeze/squeeze live on
// Tensor (tensor.h) and are implemented in engine/ops/view.cpp.
Tensor concat(const std::vector<Tensor>& tensors, int64_t dim);
// Rows of x (any rank, along dim 0) picked by an I64 index vector: out[i] = x[index[i]].
Tensor index_select(const Tensor& x, const Tensor& index);

// ---- linear algebra (engine/ops/matmul.cpp) ----
Tensor matmul(const Tensor& a, const Tensor& b);  // [M, K] x [K, N] -> [M, N]
// y = x W^T + b; x [N, in], weight [out, in], bias [out] or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// ---- convolution and pooling, NCHW (engine/ops/conv2d.cpp, pool.cpp) ----
struct Conv2dOptions {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
};
// x [N, C, H, W], weight [K, C, R, S], bias [K] or undefined -> [N, K, P, Q].
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv2dOptions& options = {});

struct Pool2dOptions {
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;
};
// Padding counts as -inf for max; for avg, padded cells count in the divisor (PyTorch default,
// count_include_pad=True).
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options);
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options);
// Global average pool to 1x1 (the only output size the models need): [N, C, H, W] -> [N, C, 1, 1].
Tensor adaptive_avg_pool2d(const Tensor& x);

// ---- fused C2F2 blocks (engine/ops/conv2d_pool_relu.cpp, engine/ops/linear_fused.cpp) ----
// relu(max_pool2d(conv2d(x, weight, bias, options), 2x2 / stride 2)), the same function, in one
// forward kernel that also keeps each window's routing for the backward (a byte per output)
// instead of the conv output. The conv output must be at least 2x2.
Tensor conv2d_pool_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const Conv2dOptions& options);
// relu(linear(x, weight, bias)), the bias and the ReLU applied in the GEMM's epilogue (C2F2's fc1).
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias);
// l2_normalize(linear(x, weight, bias), eps): an embedding head and the normalization a metric
// N / cosine loss applies to it, with the bias in the GEMM's epilogue.
Tensor linear_l2_normalize(const Tensor& x, const Tensor& weight, const Tensor& bias,
                           double eps = 1e-12);

// ---- batch norm with K branches (engine/ops/batch_norm.cpp) ----
// Rows [begin, end) of the batch are normalized by branch `branch`.
struct BatchNormRoute {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t branch = 0;
};
// x [N, C] or [N, C, H, W]. weight, bias, running_mean, running_var are [K, C] (row k = branch
// k). Routes must be disjoint, cover [0, N) in order, and name each branch at most once.
// training: statistics over the routed rows (and H, W) per channel, biased variance for
// normalization; each routed branch's running stats updated in place with
// r = (1 - momentum) r + momentum * batch_stat (unbiased variance), like PyTorch.
// eval: running stats of the routed branch. Gradients flow to x, weight and bias.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var,
                  const std::vector<BatchNormRoute>& routes, bool training, double momentum,
                  double eps);
// All N rows to one branch.
std::vector<BatchNormRoute> single_branch_route(int64_t batch, int64_t branch = 0);

// ---- metric learning building blocks (engine/ops/l2_normalize.cpp, pairwise_distance.cpp) ----
// Rows of x [N, D] divided by max(||x_i||, eps).
Tensor l2_normalize(const Tensor& x, double eps = 1e-12);

enum class DistanceMetric { Euclidean, SquaredEuclidean, Cosine };
// a [N, D], b [M, D] -> [N, M]. Euclidean: sqrt(max(||a_i - b_j||^2, 0)) whose gradient at a zero
// distance is defined as 0 (no NaN on the diagonal). Cosine distance: 1 - <a_i, b_j> /
// (max(||a_i||, eps) max(||b_j||, eps)).
Tensor pairwise_distance(const Tensor& a, const Tensor& b, DistanceMetric metric);

// ---- regularization (engine/ops/dropout.cpp) ----
// training: zero each element with probability p (Philox uniforms from gen), scale the rest by
// 1/(1-p); eval: identity.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);

// ---- adversarial step (engine/ops/pgd_step.cpp) ----
// One projected sign-gradient step of PGD, not differentiable, all tensors same shape:
//   x_new = clamp(x0 + clip(x - alpha * sign(grad) - x0, -eps, eps), 0, 1)
// (descends the objective whose gradient is `grad`; pass -grad to ascend). If max_delta is
// given it receives max |x_new - x0| as a one-element tensor on x's device, without a host sync.
Tensor pgd_step(const Tensor& x, const Tensor& x0, const Tensor& grad, double alpha, double eps,
                Tensor* max_delta = nullptr);

// ---- operators ----
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& x, double v) { return add_scalar(x, v); }
inline Tensor operator-(const Tensor& x, double v) { return add_scalar(x, -v); }
inline Tensor operator*(const Tensor& x, double v) { return mul_scalar(x, v); }
inline Tensor operator/(const Tensor& x, double v) { return mul_scalar(x, 1.0 / v); }
inline Tensor operator*(double v, const Tensor& x) { return mul_scalar(x, v); }

}  // namespace engine
