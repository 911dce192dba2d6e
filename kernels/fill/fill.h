// fill: out[i] = value for i in [0, n).
#pragma once

#include <cstdint>

namespace engine::kernels {

template <typename T>
void fill_cpu(T* out, int64_t n, T value);
void fill_cuda(float* out, int64_t n, float value);

}  // namespace engine::kernels
