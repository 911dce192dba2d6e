// index_select on CUDA against the CPU: gathers of f32 and i64 rows (exact), with repeated
// indices, rows of one element up to wide rows, a large case; and the scatter-add gradient,
// which uses atomicAdd and is therefore compared with a reduction tolerance (the order in which
// repeated rows are added is not fixed).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "tests/support/allclose.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tolerance.h"

using engine::Device;
using engine::DType;
using engine::Shape;
using engine::Tensor;

namespace {

Tensor random_f32(const Shape& shape, uint64_t seed) {
  engine::Generator gen(seed);
  return engine::uniform(shape, -1.0, 1.0, gen, DType::F32);
}

struct GatherCase {
  Shape x_shape;
  int64_t count;
};

std::vector<GatherCase> gather_cases() {
  return {{{1}, 1},          {{7}, 33},       {{33, 7}, 7},       {{255, 3, 2}, 257},
          {{257, 33}, 1003}, {{5, 1003}, 12}, {{4096, 129}, 4099}};
}

std::string case_name(const GatherCase& c) {
  return "x " + engine::shape_str(c.x_shape) + " count " + std::to_string(c.count);
}

// `count` random rows in [0, rows): with count > rows, repeats are certain.
Tensor random_index(int64_t count, int64_t rows, uint64_t seed) {
  engine::Generator gen(seed);
  return engine::randint({count}, 0, rows, gen);
}

int64_t most_repeated(const Tensor& index) {
  std::map<int64_t, int64_t> counts;
  int64_t most = 1;
  for (int64_t i : index.to_indices()) most = std::max(most, ++counts[i]);
  return most;
}

}  // namespace

TEST_CASE("index_select cuda: gathers f32 and i64 rows like the cpu", "[index_select][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 1;
  for (const GatherCase& c : gather_cases()) {
    Tensor x = random_f32(c.x_shape, seed++);
    Tensor index = random_index(c.count, c.x_shape[0], seed++);
    Tensor out = engine::index_select(x.to(Device::cuda()), index.to(Device::cuda()));
    REQUIRE(out.device().is_cuda());
    test::require_close(out, engine::index_select(x, index), 0.0, 0.0, case_name(c));
  }
  // i64 (labels gathered with their embeddings' index): labels[index] by hand.
  Tensor labels = Tensor::from_indices({10, 11, 12, 13}, {4}, Device::cuda());
  Tensor index = Tensor::from_indices({3, 0, 3, 1, 2}, {5}, Device::cuda());
  Tensor picked = engine::index_select(labels, index);
  REQUIRE(picked.dtype() == DType::I64);
  REQUIRE(picked.to_indices() == std::vector<int64_t>{13, 10, 13, 11, 12});
}

TEST_CASE("index_select cuda grad: scatter-add with repeated indices matches cpu",
          "[index_select][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // dx[r] = sum of the gradient rows whose index is r. atomicAdd makes the summation order
  // vary, so a row picked k times may differ from the CPU in the last bits: a reduction
  // tolerance for length k (sums of k weights of random sign are ~sqrt(k) in size).
  uint64_t seed = 100;
  std::vector<GatherCase> cases = gather_cases();
  cases.push_back({{3, 17}, 5000});  // heavy repeats: ~1667 rows added into each of 3
  for (const GatherCase& c : cases) {
    Tensor x = random_f32(c.x_shape, seed++);
    Tensor index = random_index(c.count, c.x_shape[0], seed++);
    Shape out_shape = c.x_shape;
    out_shape[0] = c.count;
    Tensor w = random_f32(out_shape, seed++);
    auto gradient = [&](Tensor input, const Tensor& idx, const Tensor& weight) {
      input.set_requires_grad(true);
      Tensor loss = engine::sum(engine::mul(engine::index_select(input, idx), weight));
      return engine::grad({loss}, {input})[0];
    };
    Tensor expected = gradient(x.clone(), index, w);
    Tensor actual = gradient(x.to(Device::cuda()), index.to(Device::cuda()), w.to(Device::cuda()));
    REQUIRE(actual.device().is_cuda());
    const int64_t k = most_repeated(index);
    const test::Tolerance tol = test::reduction_tolerance(k, std::sqrt(static_cast<double>(k)));
    test::require_close(actual, expected, tol.atol, tol.rtol, case_name(c));
  }
}
