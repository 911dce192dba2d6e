// dropout: zero each element with probability p and scale the survivors by 1/(1-p), so E[y] = x.
//
// Math: given uniforms u[i] in [0, 1) (from the Philox stream, see engine/random.h),
//   mask[i] = (u[i] >= p) ? 1/(1-p) : 0,   y[i] = x[i] * mask[i]
//   backward: dx[i] = dy[i] * mask[i]      (the same mask: it is saved by the forward)
// p = 1 drops everything: mask = 0 (no division by zero).
// Layout: flat contiguous arrays of n elements. The uniforms are an input rather than drawn here
// so the mask depends only on (seed, offset), identically on CPU and CUDA.
// Cost: forward reads x and u, writes y and mask (4 n elements), 1 FLOP/element; backward reads
// dy and mask, writes dx (3 n elements), 1 FLOP/element.
#pragma once

#include <cstdint>

namespace engine::kernels {

template <typename T>
void dropout_forward_cpu(const T* x, const T* u, int64_t n, T p, T* y, T* mask);

template <typename T>
void dropout_backward_cpu(const T* dy, const T* mask, int64_t n, T* dx);

// CUDA twins (f32, device pointers, same arguments; dropout_cuda.cu).
void dropout_forward_cuda(const float* x, const float* u, int64_t n, float p, float* y,
                          float* mask);
void dropout_backward_cuda(const float* dy, const float* mask, int64_t n, float* dx);

}  // namespace engine::kernels
