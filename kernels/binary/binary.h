// binary: out = a (op) b elementwise for op in {add, sub, mul, div}, with NumPy broadcasting.
//
// Math:    out[i] = a[i] + b[i] | a[i] - b[i] | a[i] * b[i] | a[i] / b[i] for every multi-index i
//          of the output shape.
// Layout:  all three arrays are described by a StridedLayout over the *output* shape (same ndim,
//          same sizes). A broadcast input has stride 0 along the dimensions it is repeated over,
//          so broadcasting costs no copy; any other strides (views) work too.
// CPU:     plain loops: one pass over the output in row-major order, advancing a multi-index.
// Cost:    n = numel(out): n FLOPs; reads up to 2n elements (fewer when an input is broadcast),
//          writes n.
#pragma once

#include <cstdint>

#include "kernels/common/layout.h"

namespace engine::kernels {

enum class BinaryOp { Add, Sub, Mul, Div };

template <typename T>
void binary_cpu(BinaryOp op, const T* a, StridedLayout a_layout, const T* b, StridedLayout b_layout,
                T* out, StridedLayout out_layout);
// CUDA twin (f32, device pointers; parallelization in binary_cuda.cu).
void binary_cuda(BinaryOp op, const float* a, StridedLayout a_layout, const float* b,
                 StridedLayout b_layout, float* out, StridedLayout out_layout);

}  // namespace engine::kernels
