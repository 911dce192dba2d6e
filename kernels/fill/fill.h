// fill: out[i] = value for i in [0, n).
#pragma once

#include <cstdint>

namespace engine::kernels {

template <typename T>
void fill_cpu(int64_t n, T value, T* out);
void fill_cuda(int64_t n, float value, float* out);

}  // namespace engine::kernels
