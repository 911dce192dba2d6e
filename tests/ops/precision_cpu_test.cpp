// The precision policy on CPU tensors (engine/precision.h): under tf32 and bf16 the CPU GEMM
// (matmul, linear) and convolution (fprop, dgrad, wgrad) multiply operands rounded exactly as the
// tensor-core kernels round them (kernels/operand_round), bias and db stay FP32, a first layer's
// dgrad (C <= 4) stays FP32 as CUDA's direct kernel does, the fused ops run unfused, f64 tensors
// never round, and fp32 keeps the CPU's bits. Hand-worked scalar products pin the roundings in
// every pass (the conv hand cases are in conv2d_tf32_cuda_test.cpp and conv2d_bf16_cuda_test.cpp,
// run on both devices); random convolutions are held to the rounded f64 reference with
// conv2d_tensor_core_test_util.h's bound; and the [cuda] cases hold the CPU to the CUDA kernels
// (a GPU or the emulator) in the same mode.
//
// Agreement bound, CPU vs CUDA: both multiply the same rounded operands, whose products are exact
// in FP32 (11 + 11 or 8 + 8 significant bits), and differ only in the order of their FP32
// additions. Each side is within L 2^-23 S of the exact sum of those products (L additions, each
// erring by at most one ulp of a partial sum bounded by S, the sum of the products' magnitudes:
// tensor_core_test_util.h), so the two are within 2 L 2^-23 S of each other. An operand rounded
// on one side and not on the other would differ by up to 2 u |a b| per term (u = 2^-11, 2^-8),
// far outside it for the short reductions used here.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/conv2d/conv2d.h"
#include "kernels/matmul/matmul.h"
#include "tests/ops/conv2d_tensor_core_test_util.h"
#include "tests/ops/tensor_core_test_util.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"

using engine::Device;
using engine::DType;
using engine::Tensor;
using engine::kernels::Conv2dShape;
using engine::kernels::Precision;
using tensor_core_test::PrecisionScope;

namespace {

namespace k = engine::kernels;
namespace ct = conv_tensor_core_test;

double p2(int exponent) { return std::ldexp(1.0, exponent); }

// y = x W^T (+ b) of 1 x 1 tensors and its gradients for dy = g, through engine::linear (with
// the bias) or engine::matmul (without: y = x W, the same 1 x 1 product).
struct ScalarPasses {
  double y, dx, dw, db;
};

ScalarPasses scalar_passes(double x_value, double w_value, double g_value, const double* bias,
                           DType dtype = DType::F32, const Device& device = Device::cpu()) {
  Tensor x = Tensor::full({1, 1}, x_value, dtype, device);
  Tensor w = Tensor::full({1, 1}, w_value, dtype, device);
  Tensor b = bias ? Tensor::full({1}, *bias, dtype, device) : Tensor();
  std::vector<Tensor> inputs = {x, w};
  if (bias) inputs.push_back(b);
  for (Tensor& t : inputs) t.set_requires_grad(true);
  const Tensor y = bias ? engine::linear(x, w, b) : engine::matmul(x, w);
  const std::vector<Tensor> g =
      engine::grad({y}, inputs, {Tensor::full({1, 1}, g_value, dtype, device)});
  // The caller's tensors are never rounded in place.
  CHECK(x.to_vector()[0] == double(float(x_value)));
  CHECK(w.to_vector()[0] == double(float(w_value)));
  return {y.to_vector()[0], g[0].to_vector()[0], g[1].to_vector()[0],
          bias ? g[2].to_vector()[0] : 0.0};
}

// TF32 operands: a = 1 + 2^-11 is a tie and goes away from zero to 1 + 2^-10 (ties to even would
// keep 1); b = 1 + 2^-12 is below half and goes to 1; g = 1 + 3 2^-12 is above half and goes to
// 1 + 2^-10.
const double kTf32A = 1.0 + p2(-11), kTf32B = 1.0 + p2(-12), kTf32G = 1.0 + 3 * p2(-12);
// BF16 operands: a = 1 + 2^-8 ties to the even 1; b = 1 + 3 2^-8 ties to the even 1 + 2^-6 (up);
// g = -(1 + 3 2^-8) the same mirrored, to -(1 + 2^-6) (TF32 would keep all three).
const double kBf16A = 1.0 + p2(-8), kBf16B = 1.0 + 3 * p2(-8), kBf16G = -kBf16B;

}  // namespace

TEST_CASE("precision cpu: matmul rounds both operands of its forward and backward products",
          "[matmul][tf32][bf16]") {
  // Strict FP32: c = a b = 1 + 2^-11 + 2^-12 + 2^-23 (exact); da = g b = 1 + 2^-10 + 3 2^-24,
  // a tie between two FP32 neighbours, to the even 1 + 2^-10 + 2^-22; db = a g
  // = 1 + 5 2^-12 + 3 2^-23 (exact).
  const ScalarPasses strict = scalar_passes(kTf32A, kTf32B, kTf32G, nullptr);
  CHECK(strict.y == 1.0 + p2(-11) + p2(-12) + p2(-23));
  CHECK(strict.dx == 1.0 + p2(-10) + p2(-22));
  CHECK(strict.dw == 1.0 + 5 * p2(-12) + 3 * p2(-23));
  {
    // TF32: c = (1 + 2^-10) 1; da = (1 + 2^-10) 1; db = (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20.
    PrecisionScope tf32(Precision::Tf32);
    const ScalarPasses rounded = scalar_passes(kTf32A, kTf32B, kTf32G, nullptr);
    CHECK(rounded.y == 1.0 + p2(-10));
    CHECK(rounded.dx == 1.0 + p2(-10));
    CHECK(rounded.dw == 1.0 + p2(-9) + p2(-20));
    // f64 tensors are the exact reference and never round: a b in double.
    const ScalarPasses f64 = scalar_passes(kTf32A, kTf32B, kTf32G, nullptr, DType::F64);
    CHECK(f64.y == kTf32A * kTf32B);
    CHECK(f64.dx == kTf32G * kTf32B);
  }
  // BF16: c = 1 (1 + 2^-6); da = -(1 + 2^-6)^2 = -(1 + 2^-5 + 2^-12); db = 1 (-(1 + 2^-6)).
  PrecisionScope bf16(Precision::Bf16);
  const ScalarPasses rounded = scalar_passes(kBf16A, kBf16B, kBf16G, nullptr);
  CHECK(rounded.y == 1.0 + p2(-6));
  CHECK(rounded.dx == -(1.0 + p2(-5) + p2(-12)));
  CHECK(rounded.dw == -(1.0 + p2(-6)));
}

TEST_CASE("precision cpu: linear rounds its products' operands, its bias and db stay FP32",
          "[matmul][tf32][bf16]") {
  {
    // bias = 1 + 2^-20 would round to 1 in TF32: y = (1 + 2^-10) + (1 + 2^-20), exact; db = g
    // unrounded (1 + 2^-10 if dy were rounded).
    const double bias = 1.0 + p2(-20);
    PrecisionScope tf32(Precision::Tf32);
    const ScalarPasses got = scalar_passes(kTf32A, kTf32B, kTf32G, &bias);
    CHECK(got.y == 2.0 + p2(-10) + p2(-20));
    CHECK(got.dx == 1.0 + p2(-10));
    CHECK(got.dw == 1.0 + p2(-9) + p2(-20));
    CHECK(got.db == kTf32G);
  }
  // bias = 1 + 2^-12 would round to 1 in BF16: y = (1 + 2^-6) + (1 + 2^-12), exact; db = g.
  const double bias = 1.0 + p2(-12);
  PrecisionScope bf16(Precision::Bf16);
  const ScalarPasses got = scalar_passes(kBf16A, kBf16B, kBf16G, &bias);
  CHECK(got.y == 2.0 + p2(-6) + p2(-12));
  CHECK(got.dx == -(1.0 + p2(-5) + p2(-12)));
  CHECK(got.dw == -(1.0 + p2(-6)));
  CHECK(got.db == kBf16G);
}

namespace {

// The first-layer rule on `device` under tf32, on 1x1 convolutions of one pixel (x = (a, 0, ...),
// w = (b, ...), dy = a; a = 1 + 2^-11 ties away to 1 + 2^-10, b = 1 + 2^-10 + 2^-11 ties away to
// 1 + 2^-9): with C = 4 dgrad is the direct FP32 kernel on CUDA, so dx = a b strict
// (1 + 2^-9 + 3 2^-22), while y and dw round (y = (1 + 2^-10)(1 + 2^-9) = 1 + 3 2^-10 + 2^-19,
// dw_0 = (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20); with C = 5 dgrad rounds too.
void check_first_layer_rule(const Device& device) {
  const double a = 1.0 + p2(-11), b = 1.0 + p2(-10) + p2(-11);
  const double strict_ab = 1.0 + p2(-9) + 3 * p2(-22), tf32_ab = 1.0 + 3 * p2(-10) + p2(-19);
  const double tf32_aa = 1.0 + p2(-9) + p2(-20);
  PrecisionScope tf32(Precision::Tf32);
  for (int channels : {4, 5}) {
    INFO("C = " << channels);
    std::vector<double> x_values(size_t(channels), 0.0);
    x_values[0] = a;
    const ct::HandPasses got = ct::one_pixel_passes(x_values, b, a, device);
    CHECK(got.y == std::vector<double>{tf32_ab});
    CHECK(got.dx == std::vector<double>(size_t(channels), channels <= 4 ? strict_ab : tf32_ab));
    std::vector<double> dw(size_t(channels), 0.0);
    dw[0] = tf32_aa;
    CHECK(got.dw == dw);
  }
}

}  // namespace

TEST_CASE("precision cpu: a first layer's dgrad (C <= 4) stays FP32 as on CUDA, by hand",
          "[conv2d][tf32]") {
  check_first_layer_rule(Device::cpu());
}

TEST_CASE("precision cuda: a first layer's dgrad (C <= 4) stays FP32, by hand",
          "[conv2d][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  check_first_layer_rule(Device::cuda());
}

TEST_CASE("precision cpu: conv2d's passes match the reference on rounded operands, db is FP32",
          "[conv2d][tf32][bf16]") {
  std::vector<Conv2dShape> shapes = ct::odd_shapes();
  for (const Conv2dShape& s : ct::network_layers()) shapes.push_back(s);
  for (Precision precision : {Precision::Tf32, Precision::Bf16}) {
    INFO(engine::precision_name(precision));
    const tensor_core_test::OperandRounding& rounding = precision == Precision::Tf32
                                                            ? tensor_core_test::kTf32Rounding
                                                            : tensor_core_test::kBf16Rounding;
    uint64_t seed = 900;
    for (const Conv2dShape& s : shapes) {
      const ct::ConvInputs in = ct::random_conv_inputs(s, seed += 4);
      ct::DevicePasses got;
      {
        PrecisionScope scope(precision);
        got = ct::engine_conv_passes(s, in, Device::cpu());
      }
      ct::require_rounded_passes_within(rounding, s, in, got);
      // db: the FP32 sum of the unrounded dy, the CPU kernel's bits.
      Tensor db = Tensor::empty({s.K});
      k::conv2d_wgrad_fast_cpu<float>(s, in.dy.data<float>(), in.x.data<float>(), nullptr,
                                      db.data<float>());
      CHECK(got.db == db.to_vector());
    }
  }
}

TEST_CASE("precision cpu: fp32 keeps the CPU kernels' bits, f64 ignores tf32 and bf16",
          "[matmul][conv2d][tf32][bf16]") {
  const Conv2dShape s = ct::conv(2, 6, 9, 9, 10, 3, 3, 2, 1);
  const ct::ConvInputs in = ct::random_conv_inputs(s, 31);
  const ct::DevicePasses got = ct::engine_conv_passes(s, in, Device::cpu());
  Tensor y = Tensor::empty({s.N, s.K, s.out_h(), s.out_w()}), dx = Tensor::empty(in.x.shape());
  Tensor dw = Tensor::empty(in.w.shape()), db = Tensor::empty({s.K});
  k::conv2d_fprop_fast_cpu<float>(s, in.x.data<float>(), in.w.data<float>(), in.b.data<float>(),
                                  y.data<float>());
  k::conv2d_dgrad_fast_cpu<float>(s, in.dy.data<float>(), in.w.data<float>(), dx.data<float>());
  k::conv2d_wgrad_fast_cpu<float>(s, in.dy.data<float>(), in.x.data<float>(), dw.data<float>(),
                                  db.data<float>());
  CHECK(got.y == y.to_vector());
  CHECK(got.dx == dx.to_vector());
  CHECK(got.dw == dw.to_vector());
  CHECK(got.db == db.to_vector());

  const Tensor a = test::random_f32({13, 7}, 41), b = test::random_f32({7, 11}, 42);
  Tensor c = Tensor::empty({13, 11});
  k::matmul_fast_cpu<float>(13, 11, 7, a.data<float>(), b.data<float>(), false, false,
                            c.data<float>(), false);
  CHECK(engine::matmul(a, b).to_vector() == c.to_vector());

  // f64: the same bits under every policy.
  const Tensor a64 = a.to(DType::F64), b64 = b.to(DType::F64);
  const ct::ConvInputs in64{in.x.to(DType::F64), in.w.to(DType::F64), in.b.to(DType::F64),
                            in.dy.to(DType::F64)};
  const std::vector<double> c64 = engine::matmul(a64, b64).to_vector();
  const ct::DevicePasses conv64 = ct::engine_conv_passes(s, in64, Device::cpu());
  for (Precision precision : {Precision::Tf32, Precision::Bf16}) {
    PrecisionScope scope(precision);
    CHECK(engine::matmul(a64, b64).to_vector() == c64);
    const ct::DevicePasses again = ct::engine_conv_passes(s, in64, Device::cpu());
    CHECK(again.y == conv64.y);
    CHECK(again.dx == conv64.dx);
    CHECK(again.dw == conv64.dw);
  }
}

TEST_CASE("precision cpu: the fused ops run unfused under tf32 and bf16", "[tf32][bf16]") {
  const Tensor x = test::random_f32({5, 9}, 51), w = test::random_f32({6, 9}, 52);
  const Tensor b = test::random_f32({6}, 53);
  const Tensor images = test::random_f32({2, 3, 10, 10}, 54);
  const Tensor filters = test::random_f32({8, 3, 3, 3}, 55), bias = test::random_f32({8}, 56);
  engine::Conv2dOptions options;
  options.pad_h = options.pad_w = 1;
  const std::vector<double> fp32_relu = engine::linear_relu(x, w, b).to_vector();
  const std::vector<double> fp32_pool =
      engine::conv2d_pool_relu(images, filters, bias, options).to_vector();
  for (Precision precision : {Precision::Tf32, Precision::Bf16}) {
    INFO(engine::precision_name(precision));
    PrecisionScope scope(precision);
    const std::vector<double> fused_relu = engine::linear_relu(x, w, b).to_vector();
    CHECK(fused_relu == engine::relu(engine::linear(x, w, b)).to_vector());
    CHECK(fused_relu != fp32_relu);
    CHECK(engine::linear_l2_normalize(x, w, b, 1e-12).to_vector() ==
          engine::l2_normalize(engine::linear(x, w, b), 1e-12).to_vector());
    const std::vector<double> fused_pool =
        engine::conv2d_pool_relu(images, filters, bias, options).to_vector();
    CHECK(fused_pool ==
          engine::relu(engine::max_pool2d(engine::conv2d(images, filters, bias, options),
                                          engine::Pool2dOptions{}))
              .to_vector());
    CHECK(fused_pool != fp32_pool);
  }
}

namespace {

// |cpu - cuda| <= 2 L 2^-23 S element by element (the header's agreement bound).
void require_agree(const char* what, const std::vector<double>& cpu,
                   const std::vector<double>& cuda, const std::vector<double>& magnitude,
                   int64_t additions) {
  ct::require_within(what, cpu, cuda, magnitude, 2 * additions);
}

// op(A) op(B)'s magnitudes |r(A)| |r(B)| in double (r the mode's rounding).
std::vector<double> product_magnitudes(const tensor_core_test::OperandRounding& rounding,
                                       const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                                       int64_t m, int64_t n, int64_t inner) {
  using tensor_core_test::magnitudes;
  using tensor_core_test::rounded;
  std::vector<double> result(size_t(m * n), 0.0);
  k::matmul_cpu<double>(m, n, inner, magnitudes(rounded(a.to_vector(), rounding)).data(),
                        magnitudes(rounded(b.to_vector(), rounding)).data(), trans_a, trans_b,
                        result.data(), false);
  return result;
}

}  // namespace

TEST_CASE("precision cpu: tf32 and bf16 agree with the CUDA kernels to FP32 accumulation error",
          "[matmul][conv2d][cuda][tf32][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  const int64_t m = 37, inner = 29, n = 41;
  const Tensor a = test::random_f32({m, inner}, 61), b = test::random_f32({inner, n}, 62);
  const Tensor dc = test::random_f32({m, n}, 63);
  // C2F2's first layer (C = 1: the FP32 dgrad), a layer just above the bound, and a strided one.
  const std::vector<Conv2dShape> shapes = {ct::conv(2, 1, 12, 12, 8, 5, 5, 1, 2),
                                           ct::conv(1, 5, 7, 7, 4, 3, 3, 1, 1),
                                           ct::conv(2, 8, 9, 9, 6, 3, 3, 2, 1)};
  for (Precision precision : {Precision::Tf32, Precision::Bf16}) {
    INFO(engine::precision_name(precision));
    const tensor_core_test::OperandRounding& rounding = precision == Precision::Tf32
                                                            ? tensor_core_test::kTf32Rounding
                                                            : tensor_core_test::kBf16Rounding;
    PrecisionScope scope(precision);
    // matmul: C = A B (L = inner), dA = dC B^T (L = n), dB = A^T dC (L = m).
    std::vector<std::vector<double>> passes[2];
    for (int side = 0; side < 2; ++side) {
      const Device device = side == 0 ? Device::cpu() : Device::cuda();
      Tensor ad = a.to(device).detach(), bd = b.to(device).detach();
      ad.set_requires_grad(true);
      bd.set_requires_grad(true);
      const Tensor c = engine::matmul(ad, bd);
      const std::vector<Tensor> g = engine::grad({c}, {ad, bd}, {dc.to(device)});
      passes[side] = {c.to_vector(), g[0].to_vector(), g[1].to_vector()};
    }
    require_agree("C", passes[0][0], passes[1][0],
                  product_magnitudes(rounding, a, false, b, false, m, n, inner), inner);
    require_agree("dA", passes[0][1], passes[1][1],
                  product_magnitudes(rounding, dc, false, b, true, m, inner, n), n);
    require_agree("dB", passes[0][2], passes[1][2],
                  product_magnitudes(rounding, a, true, dc, false, inner, n, m), m);

    uint64_t seed = 70;
    for (const Conv2dShape& s : shapes) {
      INFO(ct::describe(s));
      const ct::ConvInputs in = ct::random_conv_inputs(s, seed += 4);
      const ct::DevicePasses cpu = ct::engine_conv_passes(s, in, Device::cpu());
      const ct::DevicePasses cuda = ct::engine_conv_passes(s, in, Device::cuda());
      const ct::RoundedReference ref = ct::rounded_reference(rounding, s, in);
      require_agree("y", cpu.y, cuda.y, ref.y_magnitude, ref.y_additions);
      require_agree("dx", cpu.dx, cuda.dx, ref.dx_magnitude, ref.dx_additions);
      require_agree("dw", cpu.dw, cuda.dw, ref.dw_magnitude, ref.dw_additions);
      // db: two FP32 sums of the same unrounded dy over N P Q terms each.
      const std::vector<double> dy = in.dy.to_vector();
      const int64_t PQ = s.out_h() * s.out_w();
      std::vector<double> db_magnitude(size_t(s.K), 0.0);
      for (int64_t i = 0; i < int64_t(dy.size()); ++i) {
        db_magnitude[size_t((i / PQ) % s.K)] += std::fabs(dy[size_t(i)]);
      }
      require_agree("db", cpu.db, cuda.db, db_magnitude, s.N * PQ);
    }
  }
}
