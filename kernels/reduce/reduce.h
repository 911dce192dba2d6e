// reduce: sums along one axis, and its backward (broadcasting a gradient back).
//
// sum_axis     out[o, i] = scale * sum_{r < reduce} x[o, r, i]
//   Layout:    x is a contiguous array viewed as [outer, reduce, inner]; out is contiguous
//              [outer, inner]. Any set of adjacent dimensions of a contiguous tensor can be
//              reduced this way (outer = product of the sizes before them, inner = after), and a
//              set of non-adjacent dimensions by one call per run of adjacent ones.
//   CPU:       plain loops; the accumulator is double for both T (the reference should not add
//              its own rounding to what the CUDA version is compared with).
//   Cost:      outer*reduce*inner adds; reads outer*reduce*inner elements, writes outer*inner.
//              scale = 1 gives a sum, 1/count a mean.
//
// broadcast    dst[i] = scale * src[offset(i)] for i in row-major order of src_layout's shape.
//   Layout:    src_layout gives the destination shape and src's strides, 0 along dimensions that
//              are repeated (the dimensions a sum removed). dst is contiguous.
//   Use:       the backward of sum/mean (dx = scale * dy repeated over the reduced dims) and of
//              sum_to_shape (the gradient of a broadcast).
//   CPU:       plain loops. Cost: n multiplies; reads <= n elements, writes n.
#pragma once

#include <cstdint>

#include "kernels/common/layout.h"

namespace engine::kernels {

template <typename T>
void sum_axis_cpu(const T* x, int64_t outer, int64_t reduce, int64_t inner, T scale, T* out);

template <typename T>
void broadcast_cpu(const T* src, StridedLayout src_layout, T scale, T* dst);

// CUDA twins (f32, device pointers). sum_axis_cuda is a block/warp tree reduction in f32; long
// reductions with few outputs are split across blocks and finished by a second kernel in a fixed
// order, so results are deterministic (reduce_cuda.cu).
void sum_axis_cuda(const float* x, int64_t outer, int64_t reduce, int64_t inner, float scale,
                   float* out);
void broadcast_cuda(const float* src, StridedLayout src_layout, float scale, float* dst);

}  // namespace engine::kernels
