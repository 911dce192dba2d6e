// l2_normalize: each row of x [N, D] divided by its Euclidean norm, clamped below at eps.
//
// Math, per row i:  norm_i = sqrt(sum_d x_id^2),  r_i = max(norm_i, eps),  y_i = x_i / r_i.
// Backward (dy given):
//   norm_i >= eps:  dx_i = (dy_i - y_i <y_i, dy_i>) / norm_i   = (I - y y^T) dy / ||x||
//   norm_i <  eps:  dx_i = dy_i / eps                          (the divisor is the constant eps)
// The two branches meet the convention of clamp: the gradient passes where norm >= eps.
// Layout: x, y, dy, dx contiguous row-major [N, D]; norm is [N] (saved by the forward).
// Parallelization: plain loops, row by row; double accumulators for the sums.
// Cost: forward reads x twice, writes y, ~3 FLOPs/element; backward reads dy and x twice,
// writes dx, ~5 FLOPs/element.
#pragma once

#include <cstdint>

namespace engine::kernels {

template <typename T>
void l2_normalize_forward_cpu(const T* x, int64_t N, int64_t D, T eps, T* y, T* norm);

template <typename T>
void l2_normalize_backward_cpu(const T* dy, const T* x, const T* norm, int64_t N, int64_t D, T eps,
                               T* dx);

// CUDA twins (f32, device pointers, same arguments): one block per row (l2_normalize_cuda.cu).
void l2_normalize_forward_cuda(const float* x, int64_t N, int64_t D, float eps, float* y,
                               float* norm);
void l2_normalize_backward_cuda(const float* dy, const float* x, const float* norm, int64_t N,
                                int64_t D, float eps, float* dx);

}  // namespace engine::kernels
