// A strided view of an n-dimensional array, passed by value to kernels (so CUDA kernels receive
// it as a launch argument: no device-side allocation). Strides are in elements, 0 = broadcast.
#pragma once

#include <cstdint>

namespace engine::kernels {

constexpr int kMaxDims = 8;

struct StridedLayout {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
};

// The host loop of the CPU references over a layout: calls visit(flat, offset) for every element
// in row-major order (last dimension fastest), with flat = 0, 1, ... its position in a contiguous
// array of the layout's shape and offset = sum_d index[d] * strides[d] its position in the strided
// one.
template <typename Visit>
void for_each_strided_offset(const StridedLayout& layout, Visit visit) {
  int64_t total = 1;
  for (int d = 0; d < layout.ndim; ++d) total *= layout.shape[d];
  int64_t index[kMaxDims] = {};
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t offset = 0;
    for (int d = 0; d < layout.ndim; ++d) offset += index[d] * layout.strides[d];
    visit(flat, offset);
    for (int d = layout.ndim - 1; d >= 0; --d) {
      if (++index[d] < layout.shape[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace engine::kernels
