// index_select on CUDA against the CPU: gathers of f32 and i64 rows (exact), with repeated
// indices, rows of one element up to wide rows, a large case; and the scatter-add gradient,
// which adds in the CPU's order and so must equal it exactly, and itself on a second run.
#include <catch2/catch.hpp>

#include <algorithm>
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
#include "tests/support/tensors.h"

using engine::Device;
using engine::DType;
using engine::Shape;
using engine::Tensor;
using test::random_f32;

namespace {

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

TEST_CASE("index_select cuda grad: scatter-add with repeated indices equals the cpu bit for bit",
          "[index_select][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // dx[r] = sum of the gradient rows whose index is r. The CUDA backward adds them in ascending
  // position from 0, as the CPU does (additions only, nothing for nvcc to contract), so the
  // result is exact, and a second run gives the same bits (atomicAdd would give neither).
  uint64_t seed = 100;
  std::vector<GatherCase> cases = gather_cases();
  cases.push_back({{3, 17}, 5000});  // heavy repeats: ~1667 rows added into each of 3
  cases.push_back({{9, 5}, 0});      // nothing picked: dx is zero
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
    Tensor again = gradient(x.to(Device::cuda()), index.to(Device::cuda()), w.to(Device::cuda()));
    REQUIRE(actual.device().is_cuda());
    INFO(case_name(c) << ", most repeated row " << most_repeated(index) << " times");
    REQUIRE(actual.to_vector() == expected.to_vector());
    REQUIRE(again.to_vector() == actual.to_vector());
  }
}

TEST_CASE("index_select cuda grad: rows added in ascending position, by hand",
          "[index_select][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // Row 0 receives 1, 1e8, -1e8 (positions 0, 2, 4): in ascending order (1 + 1e8) - 1e8 = 0 in
  // f32 (1e8 + 1 rounds to 1e8), where the descending order, (-1e8 + 1e8) + 1, would give 1.
  // Row 1 receives 2 and 3; row 2 nothing.
  Tensor dy = Tensor::from_vector({1, 2, 1e8, 3, -1e8}, {5, 1}, DType::F32).to(Device::cuda());
  Tensor index = Tensor::from_indices({0, 1, 0, 1, 0}, {5}, Device::cuda());
  Tensor x = Tensor::zeros({3, 1}, DType::F32, Device::cuda());
  x.set_requires_grad(true);
  Tensor loss = engine::sum(engine::mul(engine::index_select(x, index), dy));
  REQUIRE(engine::grad({loss}, {x})[0].to_vector() == std::vector<double>{0, 5, 0});
}
