// batch_norm with K branches (MDProp / AdvProp): the batch is cut into contiguous row ranges
// ("routes"), and each range is normalized by its own branch's statistics and affine parameters.
//
// Math, per route r = rows [begin, end) -> branch k, per channel c, over the m = (end - begin) * HW
// values x[n, c, s] of that route:
//   training:  mean = (1/m) sum x,  var = (1/m) sum (x - mean)^2   (biased, used to normalize)
//              running_mean[k, c] = (1 - momentum) running_mean[k, c] + momentum * mean
//              running_var[k, c]  = (1 - momentum) running_var[k, c]  + momentum * var * m/(m-1)
//   eval:      mean = running_mean[k, c],  var = running_var[k, c]
//   both:      invstd = 1 / sqrt(var + eps),  xhat = (x - mean) * invstd
//              y = xhat * weight[k, c] + bias[k, c]
// Backward (dy given), with the same per-route sums:
//   dbias[k, c] = sum dy,  dweight[k, c] = sum dy * xhat   (rows of unused branches are zero)
//   training:  dx = weight[k, c] * invstd * (dy - sum(dy)/m - xhat * sum(dy * xhat)/m)
//   eval:      dx = weight[k, c] * invstd * dy             (the statistics are constants)
//
// Layout: x, y, dy, dx are contiguous [N, C, HW] (HW = H*W for batch_norm2d, 1 for batch_norm1d);
// weight, bias, running_mean, running_var, dweight, dbias are [K, C]; save_mean and save_invstd
// are [num_routes, C] (route-major), written by the forward and read by the backward.
//
// The routing table travels by value (like StridedLayout) so a CUDA launch can take it as an
// argument. The kernels trust it: engine/ops/batch_norm.cpp validates routes before calling.
#pragma once

#include <cstdint>

namespace engine::kernels {

// More routes than this would mean more branches than any recipe uses (MDProp: 1 + 1 + T).
constexpr int kMaxBatchNormRoutes = 16;

struct BatchNormShape {
  int64_t N = 0, C = 0, HW = 1;  // x is [N, C, HW]
  int64_t K = 0;                 // branches: rows of weight/bias/running stats
  int num_routes = 0;
  int64_t route_begin[kMaxBatchNormRoutes] = {};
  int64_t route_end[kMaxBatchNormRoutes] = {};
  int64_t route_branch[kMaxBatchNormRoutes] = {};
};

// Batch statistics, normalization and the in-place running-statistics update, for every route.
template <typename T>
void batch_norm_forward_train_cpu(const BatchNormShape& shape, const T* x, const T* weight,
                                  const T* bias, T momentum, T eps, T* y, T* save_mean,
                                  T* save_invstd, T* running_mean, T* running_var);

// Normalization with the routed branch's running statistics; save_mean/save_invstd receive the
// statistics used, per route, so the backward does not depend on later running-stat updates.
template <typename T>
void batch_norm_forward_eval_cpu(const BatchNormShape& shape, const T* x, const T* weight,
                                 const T* bias, const T* running_mean, const T* running_var, T eps,
                                 T* y, T* save_mean, T* save_invstd);

// Any of dx, dweight, dbias may be null: that gradient is not computed.
template <typename T>
void batch_norm_backward_cpu(const BatchNormShape& shape, bool training, const T* dy, const T* x,
                             const T* weight, const T* save_mean, const T* save_invstd, T* dx,
                             T* dweight, T* dbias);

// CUDA twins (f32, same arguments; batch_norm_cuda.cu), all branches in a fixed number of
// launches. One extra precondition: batch_norm_backward_cuda computing dx in training mode needs
// dweight and dbias too (the dx pass reads its per-channel sums from them).
void batch_norm_forward_train_cuda(const BatchNormShape& shape, const float* x, const float* weight,
                                   const float* bias, float momentum, float eps, float* y,
                                   float* save_mean, float* save_invstd, float* running_mean,
                                   float* running_var);
void batch_norm_forward_eval_cuda(const BatchNormShape& shape, const float* x, const float* weight,
                                  const float* bias, const float* running_mean,
                                  const float* running_var, float eps, float* y, float* save_mean,
                                  float* save_invstd);
void batch_norm_backward_cuda(const BatchNormShape& shape, bool training, const float* dy,
                              const float* x, const float* weight, const float* save_mean,
                              const float* save_invstd, float* dx, float* dweight, float* dbias);

}  // namespace engine::kernels
