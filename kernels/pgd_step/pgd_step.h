// The fused PGD step: one projected sign-gradient step of an L-infinity attack (docs/attacks.md).
//
// Math, elementwise over i in [0, n), with s = sign(g[i]) in {-1, 0, +1} (sign(0) = 0):
//   d          = x[i] - alpha * s - x0[i]            the step, measured from the clean image
//   x_new[i]   = clamp(x0[i] + clip(d, -eps, eps), 0, 1)
//   max_delta  = max_i |x_new[i] - x0[i]|            (0 when n == 0)
// The order of operations is fixed ((x - alpha s) - x0, then x0 + clip, then clamp), and every
// operation is a single IEEE rounding (alpha * s is exact), so the CUDA twin gives bit-identical
// results to the f32 CPU reference.
//
// NaN is never hidden: sign(NaN) = NaN, and clip/clamp are written as comparisons that let NaN
// through, so a NaN in x, x0 or g gives a NaN pixel and a NaN max_delta — which the attack's
// NaN count reports — instead of a silently frozen pixel.
//
// Layout: x, x0, g, x_new are contiguous arrays of n elements; max_delta points to one element
// (host memory for the CPU version, device memory for the CUDA one) or is null (not computed).
//
// Cost: ~8 FLOPs per element (sign, multiply, 2 subtractions, clip, add, clamp, |.|, max).
// Bytes: 3 reads + 1 write of sizeof(T) = 16 n for f32. Memory bound everywhere: the floor is
// 16 n / bandwidth, twice a device-to-device copy of the image (8 n), which `dml bench` uses as
// the reference.
#pragma once

#include <cstdint>

namespace engine::kernels {

template <typename T>
void pgd_step_cpu(int64_t n, const T* x, const T* x0, const T* grad, T alpha, T eps, T* x_new,
                  T* max_delta);

// Same arguments in f32; max_delta (device memory) is zeroed and reduced on the current stream
// without a host synchronization.
void pgd_step_cuda(int64_t n, const float* x, const float* x0, const float* grad, float alpha,
                   float eps, float* x_new, float* max_delta);

}  // namespace engine::kernels
