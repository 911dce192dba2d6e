// pgd_step: the fused projected sign-gradient step. Hand-computed values hitting every branch of
// the formula, eps = 0, the L-infinity bound for random inputs and over a loop of steps, f32 vs
// f64, NaN propagation, argument errors, and (on a GPU) CUDA vs CPU bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "kernels/pgd_step/pgd_step.h"
#include "tests/support/allclose.h"
#include "tests/support/cuda_guard.h"

using engine::Device;
using engine::DType;
using engine::Tensor;

namespace {

// Host inputs of one random step: x0 in [0, 1], x within ~2 eps of x0 (so every branch of clip
// and clamp occurs), g standard normal with every 7th entry exactly 0.
struct StepInputs {
  std::vector<double> x, x0, g;
};

StepInputs random_inputs(int64_t n, double eps, uint64_t seed) {
  engine::Generator gen(seed);
  StepInputs in;
  in.x0 = engine::uniform({n}, 0.0, 1.0, gen).to_vector();
  const std::vector<double> offset = engine::uniform({n}, -2.0 * eps, 2.0 * eps, gen).to_vector();
  in.g = engine::normal({n}, 0.0, 1.0, gen).to_vector();
  in.x.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    in.x[i] = in.x0[i] + offset[i];
    if (i % 7 == 3) in.g[i] = 0.0;
  }
  return in;
}

Tensor make(const std::vector<double>& values, DType dtype, Device device = Device::cpu()) {
  return Tensor::from_vector(values, {int64_t(values.size())}, dtype, device);
}

// max |a - b| over the host copies.
double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double largest = 0.0;
  for (size_t i = 0; i < a.size(); ++i) largest = std::fmax(largest, std::fabs(a[i] - b[i]));
  return largest;
}

}  // namespace

TEST_CASE("pgd_step: hand-computed values hit every branch", "[pgd_step]") {
  // alpha = 1/8, eps = 1/4: every value below is a dyadic rational, exact in f32 and f64.
  //  i  x0     x       g      x - alpha sign(g)   d = . - x0   clip(d)   x0 + clip   clamp  |.-x0|
  //  0  0.5    0.5     3      0.375               -0.125       -0.125    0.375       0.375  0.125
  //     (inside the ball)
  //  1  0.5    0.75   -1      0.875                0.375        0.25     0.75        0.75   0.25
  //     (clipped at +eps)
  //  2  0.5    0.25    2      0.125               -0.375       -0.25     0.25        0.25   0.25
  //     (clipped at -eps)
  //  3  0.125  0.0625  1     -0.0625              -0.1875      -0.1875  -0.0625      0      0.125
  //     (clamped at 0)
  //  4  0.875  1.0    -0.5    1.125                0.25         0.25     1.125       1      0.125
  //     (clamped at 1)
  //  5  0.5    0.625   0      0.625                0.125        0.125    0.625       0.625  0.125
  //     (sign(0) = 0: no move)
  //  6  0.5    0.5    -1e-30  0.625                0.125        0.125    0.625       0.625  0.125
  //     (a tiny gradient still moves a full alpha)
  // max_delta = 0.25.
  const std::vector<double> x0{0.5, 0.5, 0.5, 0.125, 0.875, 0.5, 0.5};
  const std::vector<double> x{0.5, 0.75, 0.25, 0.0625, 1.0, 0.625, 0.5};
  const std::vector<double> g{3.0, -1.0, 2.0, 1.0, -0.5, 0.0, -1e-30};
  const std::vector<double> expected{0.375, 0.75, 0.25, 0.0, 1.0, 0.625, 0.625};
  for (DType dtype : {DType::F32, DType::F64}) {
    Tensor max_delta;
    const Tensor out =
        engine::pgd_step(make(x, dtype), make(x0, dtype), make(g, dtype), 0.125, 0.25, &max_delta);
    REQUIRE(out.dtype() == dtype);
    test::require_close(out, expected, 0.0, 0.0, "x_new");
    REQUIRE(max_delta.numel() == 1);
    REQUIRE(max_delta.item() == 0.25);
  }
}

TEST_CASE("pgd_step: the raw kernel without max_delta, and with n = 0", "[pgd_step]") {
  const std::vector<float> x{0.5f, 0.9f}, x0{0.5f, 0.5f}, g{-1.0f, 1.0f};
  std::vector<float> out(2);
  // x - alpha sign(g) = {0.75, 0.65}; d = {0.25, 0.15} (eps 0.5 does not clip).
  engine::kernels::pgd_step_cpu<float>(2, x.data(), x0.data(), g.data(), 0.25f, 0.5f, out.data(),
                                       nullptr);
  REQUIRE(out[0] == 0.75f);
  REQUIRE(out[1] == (0.9f - 0.25f - 0.5f) + 0.5f);  // the same f32 roundings as the kernel
  float max_delta = -1.0f;
  engine::kernels::pgd_step_cpu<float>(0, x.data(), x0.data(), g.data(), 0.25f, 0.5f, out.data(),
                                       &max_delta);
  REQUIRE(max_delta == 0.0f);  // empty: the max over nothing is 0

  Tensor md;
  const Tensor empty = Tensor::empty({0, 3});
  REQUIRE(engine::pgd_step(empty, empty, empty, 0.1, 0.1, &md).shape() == engine::Shape{0, 3});
  REQUIRE(md.item() == 0.0);
}

TEST_CASE("pgd_step: eps = 0 leaves the clean image unchanged", "[pgd_step]") {
  const StepInputs in = random_inputs(1000, 0.05, 11);
  for (DType dtype : {DType::F32, DType::F64}) {
    const Tensor x0 = make(in.x0, dtype);
    Tensor max_delta;
    const Tensor out =
        engine::pgd_step(make(in.x, dtype), x0, make(in.g, dtype), 0.01, 0.0, &max_delta);
    test::require_close(out, x0, 0.0, 0.0, "x_new == x0");
    REQUIRE(max_delta.item() == 0.0);
  }
}

TEST_CASE("pgd_step: random inputs stay in the eps-ball and in [0, 1]", "[pgd_step]") {
  const double eps = 8.0 / 255.0, alpha = 3.0 / 255.0;
  const StepInputs in = random_inputs(4097, eps, 12);
  for (DType dtype : {DType::F32, DType::F64}) {
    // x0 + d is rounded once, so |x_new - x0| may exceed eps by half an ulp of values <= 1:
    // 2^-24 in f32, 2^-53 in f64 (plus eps's own rounding to f32).
    const double eps_t = dtype == DType::F32 ? double(float(eps)) : eps;
    const double slack = dtype == DType::F32 ? std::ldexp(1.0, -23) : std::ldexp(1.0, -52);
    const Tensor x0 = make(in.x0, dtype);
    Tensor max_delta;
    const Tensor out =
        engine::pgd_step(make(in.x, dtype), x0, make(in.g, dtype), alpha, eps, &max_delta);
    const std::vector<double> o = out.to_vector(), c = x0.to_vector();
    double largest = 0.0;
    for (size_t i = 0; i < o.size(); ++i) {
      REQUIRE(o[i] >= 0.0);
      REQUIRE(o[i] <= 1.0);
      largest = std::fmax(largest, std::fabs(o[i] - c[i]));
    }
    REQUIRE(largest <= eps_t + slack);
    REQUIRE(max_delta.item() <= eps_t + slack);
    // The fused max is the max of the written image (the kernel's |x_new - x0| is itself
    // rounded to T, hence the slack).
    REQUIRE(std::fabs(max_delta.item() - largest) <= slack);
    REQUIRE(largest > 0.9 * eps);  // some pixels did reach the boundary
  }
}

TEST_CASE("pgd_step: twenty steps of a loop never leave the ball", "[pgd_step]") {
  const double eps = 0.03, alpha = 0.01;
  const StepInputs in = random_inputs(999, eps, 13);
  const Tensor x0 = make(in.x0, DType::F64);
  Tensor x = x0;
  engine::Generator gen(14);
  for (int step = 0; step < 20; ++step) {
    Tensor max_delta;
    x = engine::pgd_step(x, x0, engine::normal({999}, 0.0, 1.0, gen, DType::F64), alpha, eps,
                         &max_delta);
    REQUIRE(max_delta.item() <= eps + 1e-15);
  }
  REQUIRE(max_abs_diff(x.to_vector(), in.x0) <= eps + 1e-15);
}

TEST_CASE("pgd_step: f32 agrees with f64 to f32 rounding", "[pgd_step]") {
  const double eps = 0.0625, alpha = 0.015625;
  const StepInputs in = random_inputs(2000, eps, 15);
  // The same (f32-representable) inputs in both precisions.
  const std::vector<double> x = make(in.x, DType::F32).to_vector();
  const std::vector<double> x0 = make(in.x0, DType::F32).to_vector();
  const std::vector<double> g = make(in.g, DType::F32).to_vector();
  Tensor md32, md64;
  const Tensor out32 = engine::pgd_step(make(x, DType::F32), make(x0, DType::F32),
                                        make(g, DType::F32), alpha, eps, &md32);
  const Tensor out64 = engine::pgd_step(make(x, DType::F64), make(x0, DType::F64),
                                        make(g, DType::F64), alpha, eps, &md64);
  // Three f32 roundings of values <= ~1.1: at most ~3 * 2^-24 apart.
  REQUIRE(max_abs_diff(out32.to_vector(), out64.to_vector()) <= 2e-7);
  REQUIRE(std::fabs(md32.item() - md64.item()) <= 2e-7);
}

TEST_CASE("pgd_step: NaN in the gradient shows up in the image and in max_delta", "[pgd_step]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor max_delta;
  const Tensor out = engine::pgd_step(make({0.5, 0.5}, DType::F32), make({0.5, 0.5}, DType::F32),
                                      make({1.0, nan}, DType::F32), 0.125, 0.25, &max_delta);
  const std::vector<double> o = out.to_vector();
  REQUIRE(o[0] == 0.375);
  REQUIRE(std::isnan(o[1]));
  REQUIRE(std::isnan(max_delta.item()));
}

TEST_CASE("pgd_step: not recorded by autograd", "[pgd_step]") {
  Tensor x = make({0.5, 0.25}, DType::F64);
  x.set_requires_grad(true);
  Tensor g = make({1.0, -1.0}, DType::F64);
  g.set_requires_grad(true);
  const Tensor out = engine::pgd_step(x, make({0.5, 0.25}, DType::F64), g, 0.125, 0.25);
  REQUIRE_FALSE(out.requires_grad());
  REQUIRE(out.grad_fn() == nullptr);
  test::require_close(out, {0.375, 0.375}, 0.0, 0.0, "x_new");
}

TEST_CASE("pgd_step: argument errors name the op and what was wrong", "[pgd_step]") {
  const Tensor a = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(engine::pgd_step(a, Tensor::zeros({3, 2}), a, 0.1, 0.1),
                      Catch::Contains("pgd_step") && Catch::Contains("x0 [3, 2]"));
  REQUIRE_THROWS_WITH(engine::pgd_step(a, a, Tensor::zeros({2, 3}, DType::F64), 0.1, 0.1),
                      Catch::Contains("pgd_step") && Catch::Contains("grad"));
  REQUIRE_THROWS_WITH(engine::pgd_step(a, a, a, -0.1, 0.1),
                      Catch::Contains("pgd_step: alpha must be finite and >= 0"));
  REQUIRE_THROWS_WITH(engine::pgd_step(a, a, a, 0.1, -0.1),
                      Catch::Contains("pgd_step: eps must be >= 0"));
  REQUIRE_THROWS_WITH(engine::pgd_step(a, a, a, std::nan(""), 0.1),
                      Catch::Contains("pgd_step: alpha"));
  REQUIRE_THROWS_WITH(engine::pgd_step(a, a, Tensor(), 0.1, 0.1),
                      Catch::Contains("pgd_step") && Catch::Contains("undefined"));
  REQUIRE_THROWS_WITH(
      engine::pgd_step(Tensor::from_indices({1, 2}, {2}), Tensor::from_indices({1, 2}, {2}),
                       Tensor::from_indices({1, 2}, {2}), 0.1, 0.1),
      Catch::Contains("pgd_step") && Catch::Contains("f32 or f64"));
}

TEST_CASE("pgd_step cuda: bit-identical to the CPU, max_delta equal, many sizes",
          "[pgd_step][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const double eps = 8.0 / 255.0, alpha = 3.0 / 255.0;
  // Odd sizes around the float4 and block boundaries, and one larger than a full grid pass
  // (2048 blocks x 256 threads x 4 = 2,097,152), so the grid-stride loop wraps.
  for (int64_t n :
       {int64_t(1), int64_t(3), int64_t(4), int64_t(5), int64_t(255), int64_t(256), int64_t(257),
        int64_t(1023), int64_t(4097), int64_t(65537), int64_t(3 * 1024 * 1024 + 5)}) {
    INFO("n = " << n);
    const StepInputs in = random_inputs(n, eps, 100 + uint64_t(n));
    Tensor md_cpu, md_cuda;
    const Tensor cpu = engine::pgd_step(make(in.x, DType::F32), make(in.x0, DType::F32),
                                        make(in.g, DType::F32), alpha, eps, &md_cpu);
    const Device gpu = Device::cuda();
    const Tensor cuda = engine::pgd_step(make(in.x, DType::F32, gpu), make(in.x0, DType::F32, gpu),
                                         make(in.g, DType::F32, gpu), alpha, eps, &md_cuda);
    REQUIRE(cuda.device().is_cuda());
    REQUIRE(md_cuda.device().is_cuda());
    test::require_close(cuda, cpu, 0.0, 0.0, "x_new cuda vs cpu");
    REQUIRE(md_cuda.item() == md_cpu.item());
  }
}

TEST_CASE("pgd_step cuda: unaligned views, no max_delta, eps = 0 and NaN", "[pgd_step][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const Device gpu = Device::cuda();
  const int64_t n = 1001;
  const StepInputs in = random_inputs(n + 1, 0.05, 21);
  // Views starting one element in: pointers off 16-byte alignment -> the scalar path.
  const Tensor x = make(in.x, DType::F32, gpu).slice(0, 1, n + 1);
  const Tensor x0 = make(in.x0, DType::F32, gpu).slice(0, 1, n + 1);
  const Tensor g = make(in.g, DType::F32, gpu).slice(0, 1, n + 1);
  const Tensor cpu =
      engine::pgd_step(x.to(Device::cpu()), x0.to(Device::cpu()), g.to(Device::cpu()), 0.01, 0.05);
  test::require_close(engine::pgd_step(x, x0, g, 0.01, 0.05), cpu, 0.0, 0.0, "unaligned");

  Tensor md;
  test::require_close(engine::pgd_step(x, x0, g, 0.01, 0.0, &md), x0, 0.0, 0.0, "eps = 0");
  REQUIRE(md.item() == 0.0);

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor out =
      engine::pgd_step(make({0.5, 0.5}, DType::F32, gpu), make({0.5, 0.5}, DType::F32, gpu),
                       make({1.0, nan}, DType::F32, gpu), 0.125, 0.25, &md);
  const std::vector<double> o = out.to_vector();
  REQUIRE(o[0] == 0.375);
  REQUIRE(std::isnan(o[1]));
  REQUIRE(std::isnan(md.item()));
}
