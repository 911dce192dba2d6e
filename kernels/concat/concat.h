// concat: joins `count` tensors along one dimension.
//
// Math:    out[..., o_i + j, ...] = input_i[..., j, ...] along the concatenated dim, where o_i is
//          the sum of the earlier inputs' sizes along it.
// Layout:  all buffers contiguous row-major. Splitting the shape at the concatenated dim into
//          outer (dims before it) and the rest, input i is `outer` blocks of width_i elements
//          (width_i = its size along the dim * the product of the later dims) and the output is
//          `outer` blocks of sum_i width_i elements: block o of the output is block o of input 0,
//          then block o of input 1, and so on.
// Parallelization: plain loops.
// Work:    no FLOPs; every element is read once and written once.
#pragma once

#include <cstdint>

namespace engine::kernels {

template <typename T>
void concat_cpu(int64_t count, const T* const* inputs, const int64_t* widths, int64_t outer,
                T* out);

// CUDA twins, f32 and i64 (labels are concatenated too). `inputs` is a HOST array of `count`
// DEVICE pointers and `widths` a host array; `out` is device memory (concat_cuda.cu).
void concat_cuda(int64_t count, const float* const* inputs, const int64_t* widths, int64_t outer,
                 float* out);
void concat_cuda(int64_t count, const int64_t* const* inputs, const int64_t* widths, int64_t outer,
                 int64_t* out);

}  // namespace engine::kernels
