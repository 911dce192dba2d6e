// axpy: y[i] += alpha * x[i] for i in [0, n). Used to accumulate gradients.
#pragma once

#include <cstdint>

namespace engine::kernels {

template <typename T>
void axpy_cpu(int64_t n, T alpha, const T* x, T* y);
void axpy_cuda(int64_t n, float alpha, const float* x, float* y);

}  // namespace engine::kernels
