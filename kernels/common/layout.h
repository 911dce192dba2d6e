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

}  // namespace engine::kernels
