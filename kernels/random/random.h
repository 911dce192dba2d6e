// Random tensors from the Philox stream (layout in philox.h). `offset` is the first Philox block
// to use; the caller (engine/random.cpp) advances it by the number of blocks consumed:
// uniform and randint use ceil(n/4) blocks, normal uses ceil(n/2).
#pragma once

#include <cstdint>

namespace engine::kernels {

template <typename T>
void random_uniform_cpu(T* out, int64_t n, uint64_t seed, uint64_t offset, T low, T high);
void random_uniform_cuda(float* out, int64_t n, uint64_t seed, uint64_t offset, float low,
                         float high);

template <typename T>
void random_normal_cpu(T* out, int64_t n, uint64_t seed, uint64_t offset, T mean, T stddev);
void random_normal_cuda(float* out, int64_t n, uint64_t seed, uint64_t offset, float mean,
                        float stddev);

// Integers in [low, high); high - low must be in [1, 2^32].
void random_randint_cpu(int64_t* out, int64_t n, uint64_t seed, uint64_t offset, int64_t low,
                        int64_t high);

}  // namespace engine::kernels
