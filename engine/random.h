// Seeded, counter-based random numbers (Philox4x32-10, kernels/random/philox.h). A Generator is
// just (seed, offset): each call consumes a range of Philox blocks and advances the offset, so the
// numbers depend only on the seed and the sequence of calls — not on the device. Saving and
// restoring (seed, offset) resumes the stream exactly (checkpoints do this).
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace engine {

struct Generator {
  uint64_t seed = 0;
  uint64_t offset = 0;  // next unused Philox block

  explicit Generator(uint64_t seed_ = 0) : seed(seed_) {}
  // Reserves `blocks` Philox blocks and returns the first.
  uint64_t take(uint64_t blocks) {
    uint64_t first = offset;
    offset += blocks;
    return first;
  }
};

// SplitMix64 (Steele, Lea & Flood 2014), used to derive independent seeds: splitmix64_finalize is
// its output function, a bijection of 64-bit words that sends neighbouring inputs to unrelated
// outputs; splitmix64 is one whole step (add the golden-ratio increment, then finalize).
constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;
inline uint64_t splitmix64_finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline uint64_t splitmix64(uint64_t x) { return splitmix64_finalize(x + kGoldenGamma); }

// The process-wide generator used when none is given; `manual_seed` resets it.
Generator& default_generator();
void manual_seed(uint64_t seed);

Tensor uniform(const Shape& shape, double low, double high, Generator& gen,
               DType dtype = DType::F32, Device device = Device::cpu());
Tensor normal(const Shape& shape, double mean, double stddev, Generator& gen,
              DType dtype = DType::F32, Device device = Device::cpu());
// I64 integers in [low, high).
Tensor randint(const Shape& shape, int64_t low, int64_t high, Generator& gen,
               Device device = Device::cpu());
// A uniformly random permutation of 0..n-1 (I64; Fisher-Yates on the host).
Tensor permutation(int64_t n, Generator& gen, Device device = Device::cpu());
std::vector<int64_t> permutation_vector(int64_t n, Generator& gen);

}  // namespace engine
