// Scalar and unary ops on CUDA against the CPU reference (f64 on the same f32 inputs), forward
// and backward, over sizes that fit no block (1, 7, 33, 255, 257, 1003) and a large one; NaN
// propagation by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
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
using engine::Tensor;
using test::random_f32;

namespace {

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> fn;
  double low, high;  // input range: inside the op's domain and away from kinks in density
};

std::vector<UnaryCase> all_cases() {
  return {
      {"add_scalar", [](const Tensor& x) { return engine::add_scalar(x, 0.75); }, -2, 2},
      {"mul_scalar", [](const Tensor& x) { return engine::mul_scalar(x, -1.5); }, -2, 2},
      {"neg", [](const Tensor& x) { return engine::neg(x); }, -2, 2},
      {"relu", [](const Tensor& x) { return engine::relu(x); }, -2, 2},
      {"exp", [](const Tensor& x) { return engine::exp(x); }, -3, 3},
      {"log", [](const Tensor& x) { return engine::log(x); }, 0.1, 3},
      {"sqrt", [](const Tensor& x) { return engine::sqrt(x); }, 0.1, 3},
      {"pow 2.5", [](const Tensor& x) { return engine::pow(x, 2.5); }, 0.1, 2},
      {"pow -1", [](const Tensor& x) { return engine::pow(x, -1.0); }, 0.5, 2},
      {"pow 0", [](const Tensor& x) { return engine::pow(x, 0.0); }, -2, 2},
      {"abs", [](const Tensor& x) { return engine::abs(x); }, -2, 2},
      {"sign", [](const Tensor& x) { return engine::sign(x); }, -2, 2},
      {"clamp", [](const Tensor& x) { return engine::clamp(x, -0.5, 0.75); }, -2, 2},
  };
}

}  // namespace

TEST_CASE("unary cuda: every op forward and backward matches cpu over odd sizes", "[unary][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // Forward: one f32 evaluation (expf/logf/powf are within 2-4 ulp, sqrtf exact) against f64:
  // the elementwise tolerance (1e-5 relative, ~80 ulp). Backward through autograd:
  // L = sum(f(x) * w), dL/dx = w f'(x), again one or two f32 roundings per element.
  const test::Tolerance tol = test::elementwise_tolerance();
  uint64_t seed = 1;
  for (const UnaryCase& c : all_cases()) {
    for (int64_t n : {1, 7, 33, 255, 257, 1003, (1 << 18) + 3}) {
      const std::string what = std::string(c.name) + " n=" + std::to_string(n);
      Tensor x = random_f32({n}, seed++, c.low, c.high);
      Tensor w = random_f32({n}, seed++, -1, 1);

      Tensor y_cpu = c.fn(x.to(DType::F64));
      Tensor y_cuda = c.fn(x.to(Device::cuda()));
      REQUIRE(y_cuda.device().is_cuda());
      test::require_close(y_cuda, y_cpu, tol.atol, tol.rtol, what + " forward");

      auto gradient = [&](Tensor input, const Tensor& weight) {
        input.set_requires_grad(true);
        return engine::grad({engine::sum(engine::mul(c.fn(input), weight))}, {input})[0];
      };
      Tensor dx_cpu = gradient(x.to(DType::F64), w.to(DType::F64));
      Tensor dx_cuda = gradient(x.to(Device::cuda()), w.to(Device::cuda()));
      REQUIRE(dx_cuda.device().is_cuda());
      test::require_close(dx_cuda, dx_cpu, tol.atol, tol.rtol, what + " backward");
    }
  }
}

TEST_CASE("unary cuda: a strided input is made contiguous first", "[unary][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  Tensor x = random_f32({33, 7}, 500, -2, 2);
  Tensor expected = engine::exp(x.to(DType::F64).transpose(0, 1));
  Tensor actual = engine::exp(x.to(Device::cuda()).transpose(0, 1));
  const test::Tolerance tol = test::elementwise_tolerance();
  test::require_close(actual, expected, tol.atol, tol.rtol, "exp of a transpose");
}

TEST_CASE("unary cuda: NaN passes through relu, abs, clamp and sign", "[unary][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // x = [NaN, -2, 3]: relu -> [NaN, 0, 3]; abs -> [NaN, 2, 3]; clamp(-1, 1) -> [NaN, -1, 1];
  // sign -> [NaN, -1, 1].
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = Tensor::from_vector({nan, -2, 3}, {3}, DType::F32, Device::cuda());
  auto check = [](const Tensor& y, double second, double third, const char* what) {
    std::vector<double> v = y.to_vector();
    INFO(what);
    REQUIRE(std::isnan(v[0]));
    REQUIRE(v[1] == second);
    REQUIRE(v[2] == third);
  };
  check(engine::relu(x), 0, 3, "relu");
  check(engine::abs(x), 2, 3, "abs");
  check(engine::clamp(x, -1, 1), -1, 1, "clamp");
  check(engine::sign(x), -1, 1, "sign");
}
