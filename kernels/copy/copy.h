// copy_strided: gathers a strided view into a contiguous buffer (what Tensor::contiguous() does).
//   dst[flat(i_0..i_{d-1})] = src[sum_k i_k * strides[k]], dst in row-major order of `shape`.
// convert: element type conversion between contiguous buffers (f32 <-> f64).
#pragma once

#include <cstdint>

#include "kernels/common/layout.h"

namespace engine::kernels {

template <typename T>
void copy_strided_cpu(const T* src, StridedLayout src_layout, T* dst);
void copy_strided_cuda(const float* src, StridedLayout src_layout, float* dst);

// The inverse: scatters a contiguous buffer into a strided destination (Tensor::copy_ into a view).
//   dst[sum_k i_k * strides[k]] = src[flat(i_0..i_{d-1})]; dst strides must not overlap (no 0s).
template <typename T>
void copy_into_strided_cpu(const T* src, T* dst, StridedLayout dst_layout);
void copy_into_strided_cuda(const float* src, float* dst, StridedLayout dst_layout);

template <typename From, typename To>
void convert_cpu(const From* src, int64_t n, To* dst);

}  // namespace engine::kernels
