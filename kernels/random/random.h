// Random tensors from the Philox stream (layout in philox.h). `offset` is the first Philox block
// to use; the caller (engine/random.cpp) advances it by the number of blocks consumed:
// uniform and randint use ceil(n/4) blocks, normal uses ceil(n/2).
#pragma once

#include <cstdint>

namespace engine::kernels {

template <typename T>
void random_uniform_cpu(int64_t n, uint64_t seed, uint64_t offset, T low, T high, T* out);
void random_uniform_cuda(int64_t n, uint64_t seed, uint64_t offset, float low, float high,
                         float* out);

template <typename T>
void random_normal_cpu(int64_t n, uint64_t seed, uint64_t offset, T mean, T stddev, T* out);
void random_normal_cuda(int64_t n, uint64_t seed, uint64_t offset, float mean, float stddev,
                        float* out);

// Integers in [low, high); high - low must be in [1, 2^32].
void random_randint_cpu(int64_t n, uint64_t seed, uint64_t offset, int64_t low, int64_t high,
                        int64_t* out);

}  // namespace engine::kernels
