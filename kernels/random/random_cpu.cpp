// Random tensors, CPU reference: element by element from the Philox stream (see philox.h).
#include <cmath>

#include "kernels/common/instantiate.h"
#include "kernels/random/philox.h"
#include "kernels/random/random.h"

namespace engine::kernels {

template <typename T>
void random_uniform_cpu(int64_t n, uint64_t seed, uint64_t offset, T low, T high, T* out) {
  PhiloxBlock block{};
  for (int64_t i = 0; i < n; ++i) {
    if (i % 4 == 0) block = philox4x32_10(offset + uint64_t(i) / 4, 0, seed);  // 4 words a block
    T u = static_cast<T>(philox_uniform01(block.word[i % 4]));
    out[i] = low + (high - low) * u;
  }
}

template <typename T>
void random_normal_cpu(int64_t n, uint64_t seed, uint64_t offset, T mean, T stddev, T* out) {
  const double two_pi = 6.283185307179586476925286766559;
  PhiloxBlock block{};
  for (int64_t i = 0; i < n; ++i) {
    if (i % 2 == 0) block = philox4x32_10(offset + uint64_t(i) / 2, 0, seed);  // 2 outputs a block
    // Box-Muller in float, as the CUDA kernel does, so both devices give the same numbers up to
    // the last bits of log/sin/cos (CUDA's and glibc's differ by an ulp or two).
    float u1 = philox_uniform01_open_low(block.word[0]);
    float u2 = philox_uniform01(block.word[1]);
    float radius = std::sqrt(-2.0f * std::log(u1));
    float angle = static_cast<float>(two_pi) * u2;
    float z = (i % 2 == 0) ? radius * std::cos(angle) : radius * std::sin(angle);
    out[i] = mean + stddev * static_cast<T>(z);
  }
}

void random_randint_cpu(int64_t n, uint64_t seed, uint64_t offset, int64_t low, int64_t high,
                        int64_t* out) {
  uint64_t range = static_cast<uint64_t>(high - low);
  PhiloxBlock block{};
  for (int64_t i = 0; i < n; ++i) {
    if (i % 4 == 0) block = philox4x32_10(offset + uint64_t(i) / 4, 0, seed);
    out[i] = low + static_cast<int64_t>((uint64_t(block.word[i % 4]) * range) >> 32);
  }
}

ENGINE_INSTANTIATE_FLOATING(random_uniform_cpu);
ENGINE_INSTANTIATE_FLOATING(random_normal_cpu);

}  // namespace engine::kernels
