// Test inputs the op tests build again and again: small F64 tensors written out by hand (with or
// without gradient) and F32 tensors of uniform noise from a seed, plus the root mean square that
// scales a tolerance to the values compared.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/random.h"
#include "engine/tensor.h"

namespace test {

// `values` as a CPU F64 tensor of `shape`.
inline engine::Tensor f64(const std::vector<double>& values, const engine::Shape& shape) {
  return engine::Tensor::from_vector(values, shape, engine::DType::F64);
}

// f64() as a leaf that requires grad (the input of a gradient check).
inline engine::Tensor f64_leaf(const std::vector<double>& values, const engine::Shape& shape) {
  engine::Tensor t = f64(values, shape);
  t.set_requires_grad(true);
  return t;
}

// A CPU F32 tensor of `shape` drawn uniformly from [low, high) by a generator seeded with `seed`:
// the same seed gives the same tensor, so a CUDA result can be compared with the CPU reference
// on a copy of the same input.
inline engine::Tensor random_f32(const engine::Shape& shape, uint64_t seed, double low = -1.0,
                                 double high = 1.0) {
  engine::Generator gen(seed);
  return engine::uniform(shape, low, high, gen, engine::DType::F32);
}

// sqrt(mean(v^2)); 0 for an empty vector.
inline double rms(const std::vector<double>& v) {
  double sum = 0.0;
  for (double e : v) sum += e * e;
  return v.empty() ? 0.0 : std::sqrt(sum / static_cast<double>(v.size()));
}

}  // namespace test
