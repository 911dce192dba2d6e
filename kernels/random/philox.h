// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. Block b of the stream for key k is philox(counter = b, key = k): four
// 32-bit words that depend only on (b, k). So element i of any random tensor can be computed
// independently, on the CPU or by CUDA thread i, and both give the same words (what is computed
// from them in float may differ in the last bit: random_cuda.cu).
//
// How the engine lays out streams (kernels/random/random.h):
//   uniform  element i -> block offset + i/4, word i%4, u = (word >> 8) * 2^-24 in [0, 1)
//   normal   element i -> block offset + i/2, words 0,1 -> Box-Muller (cos for even i, sin for odd)
//   randint  element i -> block offset + i/4, word i%4, low + (word * range) >> 32
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PHILOX_HOST_DEVICE __host__ __device__
#else
#define PHILOX_HOST_DEVICE
#endif

namespace engine::kernels {

struct PhiloxBlock {
  uint32_t word[4];
};

PHILOX_HOST_DEVICE inline PhiloxBlock philox4x32_10(uint64_t counter_lo, uint64_t counter_hi,
                                                    uint64_t key) {
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c0;
    uint64_t p1 = uint64_t(0xCD9E8D57u) * c2;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return PhiloxBlock{{c0, c1, c2, c3}};
}

// 24 random bits -> [0, 1); exactly representable in float and double, so f32 and f64 agree.
PHILOX_HOST_DEVICE inline float philox_uniform01(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

// 24 random bits -> (0, 1]; safe to take the log of.
PHILOX_HOST_DEVICE inline float philox_uniform01_open_low(uint32_t word) {
  return static_cast<float>((word >> 8) + 1u) * (1.0f / 16777216.0f);
}

}  // namespace engine::kernels
