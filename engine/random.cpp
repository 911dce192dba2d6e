#include "engine/random.h"

#include "kernels/random/philox.h"
#include "kernels/random/random.h"

namespace engine {

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator() = Generator(seed); }

namespace {
uint64_t blocks_for(int64_t n, int64_t per_block) {
  return static_cast<uint64_t>((n + per_block - 1) / per_block);
}
}  // namespace

Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype,
               Device device) {
  ENGINE_CHECK(is_floating(dtype), "uniform: dtype must be f32 or f64");
  Tensor out = Tensor::empty(shape, dtype, device);
  int64_t n = out.numel();
  uint64_t offset = gen.take(blocks_for(n, 4));
  if (device.is_cuda()) {
    kernels::random_uniform_cuda(n, gen.seed, offset, float(low), float(high), out.data<float>());
  } else if (dtype == DType::F32) {
    kernels::random_uniform_cpu(n, gen.seed, offset, float(low), float(high), out.data<float>());
  } else {
    kernels::random_uniform_cpu(n, gen.seed, offset, low, high, out.data<double>());
  }
  return out;
}

Tensor normal(const Shape& shape, double mean, double stddev, Generator& gen, DType dtype,
              Device device) {
  ENGINE_CHECK(is_floating(dtype), "normal: dtype must be f32 or f64");
  Tensor out = Tensor::empty(shape, dtype, device);
  int64_t n = out.numel();
  uint64_t offset = gen.take(blocks_for(n, 2));
  if (device.is_cuda()) {
    kernels::random_normal_cuda(n, gen.seed, offset, float(mean), float(stddev), out.data<float>());
  } else if (dtype == DType::F32) {
    kernels::random_normal_cpu(n, gen.seed, offset, float(mean), float(stddev), out.data<float>());
  } else {
    kernels::random_normal_cpu(n, gen.seed, offset, mean, stddev, out.data<double>());
  }
  return out;
}

Tensor randint(const Shape& shape, int64_t low, int64_t high, Generator& gen, Device device) {
  ENGINE_CHECK(high > low && uint64_t(high - low) <= (uint64_t(1) << 32), "randint: range [", low,
               ", ", high, ") must be non-empty and at most 2^32 wide");
  Tensor out = Tensor::empty(shape, DType::I64, Device::cpu());
  int64_t n = out.numel();
  kernels::random_randint_cpu(n, gen.seed, gen.take(blocks_for(n, 4)), low, high,
                              out.data<int64_t>());
  return out.to(device);
}

std::vector<int64_t> permutation_vector(int64_t n, Generator& gen) {
  ENGINE_CHECK(n >= 0, "permutation: negative length ", n);
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  if (n < 2) return perm;
  // Fisher-Yates from the end: swap position i with j uniform in [0, i]; draw i is word i%4 of
  // Philox block offset + i/4 (the randint layout), scaled to the range by a 64-bit multiply.
  uint64_t offset = gen.take(blocks_for(n, 4));
  for (int64_t i = n - 1; i >= 1; --i) {
    kernels::PhiloxBlock block = kernels::philox4x32_10(offset + uint64_t(i) / 4, 0, gen.seed);
    int64_t j = static_cast<int64_t>((uint64_t(block.word[i % 4]) * uint64_t(i + 1)) >> 32);
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

Tensor permutation(int64_t n, Generator& gen, Device device) {
  return Tensor::from_indices(permutation_vector(n, gen), {n}, device);
}

}  // namespace engine
