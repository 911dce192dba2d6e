// add/sub/mul/div on CUDA against the CPU reference: broadcasting shapes of every kind (scalar,
// bias-like, middle dims, leading dims), odd sizes that fit no block, strided views, a large
// case, and the gradients (which reduce over broadcast dims through sum_to_shape on the device).
//
// The reference runs in f64 on the same f32 inputs: one f32 operation is within half an ulp
// (6e-8 relative) of it, far inside the elementwise tolerance.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "tests/support/allclose.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"
#include "tests/support/tolerance.h"

using engine::Device;
using engine::DType;
using engine::Shape;
using engine::Tensor;

namespace {

using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;
using test::random_f32;

struct NamedOp {
  const char* name;
  BinaryFn fn;
};

std::vector<NamedOp> all_ops() {
  return {{"add", [](const Tensor& a, const Tensor& b) { return engine::add(a, b); }},
          {"sub", [](const Tensor& a, const Tensor& b) { return engine::sub(a, b); }},
          {"mul", [](const Tensor& a, const Tensor& b) { return engine::mul(a, b); }},
          {"div", [](const Tensor& a, const Tensor& b) { return engine::div(a, b); }}};
}

// b in [0.5, 1.5] keeps div away from division by ~0.
Tensor divisor_safe(const Shape& shape, uint64_t seed) { return random_f32(shape, seed, 0.5, 1.5); }

std::string case_name(const char* op, const Shape& a, const Shape& b) {
  return std::string(op) + " " + engine::shape_str(a) + " with " + engine::shape_str(b);
}

}  // namespace

TEST_CASE("binary cuda: add/sub/mul/div with broadcasting match cpu", "[binary][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{1}, {1}},
      {{7}, {7}},
      {{33}, {1}},           // a one-element operand repeated
      {{257}, {}},           // a 0-d scalar operand
      {{255, 3}, {3}},       // bias add: the second operand repeats over rows
      {{3, 255}, {3, 1}},    // a column repeated over columns
      {{1}, {1003}},         // the first operand broadcast
      {{4, 1, 33}, {7, 1}},  // both operands broadcast, into [4, 7, 33]
      {{2, 3, 4, 5}, {3, 1, 5}},
      {{1003, 257}, {257}},
      {{(1 << 20) + 3}, {(1 << 20) + 3}},  // large, same shape (the 1-D fast path)
  };
  uint64_t seed = 1;
  for (const auto& [a_shape, b_shape] : cases) {
    Tensor a = random_f32(a_shape, seed++);
    Tensor b = divisor_safe(b_shape, seed++);
    for (const NamedOp& op : all_ops()) {
      Tensor expected = op.fn(a.to(DType::F64), b.to(DType::F64));
      Tensor actual = op.fn(a.to(Device::cuda()), b.to(Device::cuda()));
      REQUIRE(actual.device().is_cuda());
      REQUIRE(actual.shape() == expected.shape());
      const test::Tolerance tol = test::elementwise_tolerance();
      test::require_close(actual, expected, tol.atol, tol.rtol,
                          case_name(op.name, a_shape, b_shape));
    }
  }
}

TEST_CASE("binary cuda: strided views (transpose, slice, expand) as operands", "[binary][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // Views are passed to the kernel with their own strides; nothing is made contiguous first.
  Tensor x = random_f32({33, 17}, 11);
  Tensor y = divisor_safe({17, 33}, 12);
  Tensor z = divisor_safe({5, 40}, 13);
  Tensor xd = x.to(Device::cuda()), yd = y.to(Device::cuda()), zd = z.to(Device::cuda());
  const test::Tolerance tol = test::elementwise_tolerance();
  for (const NamedOp& op : all_ops()) {
    // [33, 17] (op) transpose of [17, 33]
    Tensor expected = op.fn(x.to(DType::F64), y.to(DType::F64).transpose(0, 1));
    test::require_close(op.fn(xd, yd.transpose(0, 1)), expected, tol.atol, tol.rtol,
                        std::string(op.name) + " with a transposed operand");
    // columns 3..19 of [5, 40] with step 1, against a row of x expanded over 5 rows
    Tensor expected2 =
        op.fn(x.to(DType::F64).slice(0, 2, 3).expand({5, 17}), z.to(DType::F64).slice(1, 3, 20));
    test::require_close(op.fn(xd.slice(0, 2, 3).expand({5, 17}), zd.slice(1, 3, 20)), expected2,
                        tol.atol, tol.rtol, std::string(op.name) + " with sliced/expanded views");
  }
}

TEST_CASE("binary cuda grad: broadcast gradients sum back to each operand's shape",
          "[binary][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // L = sum(op(a, b) * w): da and db are the elementwise gradient summed over the dims where the
  // operand was repeated (sum_to_shape, i.e. the CUDA sum kernel). b [33] repeated over 257 rows
  // gets sums of 257 terms: a reduction tolerance for that length, magnitude ~sqrt(length)
  // (the size of a sum of `length` terms of random sign).
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{7, 33}, {7, 33}}, {{257, 33}, {33}}, {{4, 1, 33}, {7, 1}}, {{1003}, {}}};
  uint64_t seed = 100;
  for (const auto& [a_shape, b_shape] : cases) {
    Tensor a = random_f32(a_shape, seed++);
    Tensor b = divisor_safe(b_shape, seed++);
    for (const NamedOp& op : all_ops()) {
      const Shape out_shape = op.fn(a, b).shape();
      Tensor w = random_f32(out_shape, seed++);
      auto gradients = [&](Tensor x, Tensor y, const Tensor& weight) {
        x.set_requires_grad(true);
        y.set_requires_grad(true);
        return engine::grad({engine::sum(engine::mul(op.fn(x, y), weight))}, {x, y});
      };
      std::vector<Tensor> expected =
          gradients(a.to(DType::F64), b.to(DType::F64), w.to(DType::F64));
      std::vector<Tensor> actual =
          gradients(a.to(Device::cuda()), b.to(Device::cuda()), w.to(Device::cuda()));
      const int64_t out_numel = engine::shape_numel(out_shape);
      for (int k = 0; k < 2; ++k) {
        REQUIRE(actual[k].device().is_cuda());
        const int64_t repeats = out_numel / expected[k].numel();
        const test::Tolerance tol =
            test::reduction_tolerance(repeats, std::sqrt(static_cast<double>(repeats)));
        test::require_close(actual[k], expected[k], tol.atol, tol.rtol,
                            case_name(op.name, a_shape, b_shape) + (k == 0 ? ": da" : ": db"));
      }
    }
  }
}
