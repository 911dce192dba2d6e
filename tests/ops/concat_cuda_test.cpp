// concat on CUDA against the CPU: f32 along every dim (blocks of one element up to whole
// tensors), i64 labels, a large case, and the gradient (each input gets its slice). Pure data
// movement, so results are compared exactly.
#include <catch2/catch.hpp>

#include <cstdint>
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

struct ConcatCase {
  std::vector<Shape> shapes;
  int64_t dim;
};

std::vector<ConcatCase> concat_cases() {
  return {
      {{{1}, {1}}, 0},
      {{{7}, {33}, {1}}, 0},                   // one block each
      {{{2, 3, 4}, {2, 5, 4}}, 1},             // middle dim
      {{{2, 3, 4}, {2, 3, 1}, {2, 3, 7}}, 2},  // last dim: blocks of 4, 1, 7 elements
      {{{3, 255}, {3, 257}}, 1},
      {{{255, 3}, {257, 3}, {1, 3}}, 0},
      {{{1003, 1000}, {1003, 3}}, 1},  // large
  };
}

std::string case_name(const ConcatCase& c) {
  std::string s;
  for (const Shape& shape : c.shapes) s += engine::shape_str(shape) + " ";
  return s + "along dim " + std::to_string(c.dim);
}

}  // namespace

TEST_CASE("concat cuda: f32 along every dim matches cpu", "[concat][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 1;
  for (const ConcatCase& c : concat_cases()) {
    std::vector<Tensor> host, device;
    for (const Shape& shape : c.shapes) {
      host.push_back(random_f32(shape, seed++));
      device.push_back(host.back().to(Device::cuda()));
    }
    Tensor out = engine::concat(device, c.dim);
    REQUIRE(out.device().is_cuda());
    test::require_close(out, engine::concat(host, c.dim), 0.0, 0.0, case_name(c));
  }
}

TEST_CASE("concat cuda: i64 labels", "[concat][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  Tensor a = Tensor::from_indices({3, 1, 4}, {3}, Device::cuda());
  Tensor b = Tensor::from_indices({1, 5, 9, 2, 6}, {5}, Device::cuda());
  Tensor out = engine::concat({a, b}, 0);
  REQUIRE(out.dtype() == DType::I64);
  REQUIRE(out.to_indices() == std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6});
}

TEST_CASE("concat cuda grad: each input receives its slice of the gradient", "[concat][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 100;
  for (const ConcatCase& c : concat_cases()) {
    std::vector<Tensor> host, device;
    for (const Shape& shape : c.shapes) {
      Tensor t = random_f32(shape, seed++);
      host.push_back(t.clone());
      device.push_back(t.to(Device::cuda()));
      host.back().set_requires_grad(true);
      device.back().set_requires_grad(true);
    }
    Tensor w = random_f32(engine::concat(host, c.dim).shape(), seed++);
    std::vector<Tensor> expected =
        engine::grad({engine::sum(engine::mul(engine::concat(host, c.dim), w))}, host);
    std::vector<Tensor> actual = engine::grad(
        {engine::sum(engine::mul(engine::concat(device, c.dim), w.to(Device::cuda())))}, device);
    for (size_t i = 0; i < expected.size(); ++i) {
      REQUIRE(actual[i].device().is_cuda());
      // dL/d input_i = the slice of w it was copied to: exact (one multiply by 1 each way).
      test::require_close(actual[i], expected[i], 0.0, 0.0,
                          case_name(c) + ": input " + std::to_string(i));
    }
  }
}
