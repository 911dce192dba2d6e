// conv2d on BF16 tensor cores (kernels/conv2d/conv2d_tensor_core_cuda.cu, the TF32 kernels' body
// with BF16 operands, WMMA m16n16k16): fprop, dgrad and wgrad against a CPU reference that
// rounds both operands of every product to BF16 first (8 significant bits, round to nearest, ties
// to even, as __float2bfloat16; tensor_core_test_util.h's round_to_bf16, written with frexp and
// std::nearbyint, not with the emulator's bit trick, and checked on hand-rounded ties in
// matmul_bf16_cuda_test.cpp) and sums in double, over odd sizes, strides, padding and dilation,
// C2F2's two layers, ResNet-like 3x3 layers and wgrad's split-K path; each pass must also differ
// from the strict FP32 kernels' result (so a kernel that silently ran FP32 fails); a hand-worked
// 1x1 convolution whose operands round (a tie down to even, a tie up to even, a carry into the
// exponent), through the engine, on CUDA and on the CPU (which rounds the same operands:
// engine/precision.h); the dispatch of engine::conv2d under bf16 (the BF16 kernels'
// bits forward and backward) and conv2d_pool_relu under bf16.
//
// Tolerance: conv2d_tensor_core_test_util.h's, with its reasons: a product of two BF16 values (at
// most 16 significant bits) is exact in FP32, so the only error left is the FP32 rounding of the
// L additions of each output, |got - reference| <= L 2^-23 S (S = sum |rounded a| |rounded b|).
// Not rounding an operand (or rounding it to TF32) misses the reference by up to 2^-7 |a b| per
// term: outside the bound on the short reductions and on the hand-worked case, and caught by the
// differs-from-strict checks everywhere.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/conv2d/conv2d.h"
#include "tests/ops/conv2d_tensor_core_test_util.h"
#include "tests/ops/tensor_core_test_util.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"

using engine::Device;
using engine::DType;
using engine::Tensor;
using engine::kernels::Conv2dShape;
using engine::kernels::Precision;
using test::random_f32;

namespace {

using conv_tensor_core_test::conv;
using conv_tensor_core_test::DevicePasses;
using conv_tensor_core_test::HandPasses;
using tensor_core_test::PrecisionScope;

double power_of_two(int exponent) { return std::ldexp(1.0, exponent); }

// The BF16 kernels match the BF16-rounded reference, and differ from the strict FP32 kernels on
// the same operands (random operands have 24-bit significands, so some product of every output
// rounds differently; dgrad with C <= 4 is the direct FP32 kernel in every mode, so equal there).
void require_bf16_conv_matches(const Conv2dShape& s, uint64_t seed) {
  INFO(conv_tensor_core_test::describe(s));
  const DevicePasses bf16 = conv_tensor_core_test::require_tensor_core_conv_matches(
      Precision::Bf16, tensor_core_test::kBf16Rounding, s, seed);
  const DevicePasses strict = conv_tensor_core_test::run_tensor_core_conv(
      Precision::Fp32, s, conv_tensor_core_test::random_conv_inputs(s, seed));
  CHECK(bf16.y != strict.y);
  CHECK(bf16.dw != strict.dw);
  if (s.C <= 4) {
    CHECK(bf16.dx == strict.dx);
  } else {
    CHECK(bf16.dx != strict.dx);
  }
}

// The hand-worked operands (BF16 keeps 8 significant bits):
//   a = 1 + 2^-8: half way between 1 and 1 + 2^-7, goes to the even 1;
//   b = 1 + 3 2^-8: half way between 1 + 2^-7 (odd) and 1 + 2^-6 (even), goes up to 1 + 2^-6;
//   e = 2 - 2^-9 = 1.111111111 (binary): above the half way point 2 - 2^-8 between 2 - 2^-7 and 2,
//     so it rounds up to 2, the carry running into the exponent.
const double kA = 1.0 + power_of_two(-8);
const double kB = 1.0 + 3 * power_of_two(-8);
const double kE = 2.0 - power_of_two(-9);

// A 1x1 convolution of one pixel with C = 8 channels (above the direct dgrad's 4) and K = 1:
// x = (a, e, 0, ..., 0), w = (b, ..., b), dy = a. Then y = a b + e b, dx_c = a b for every c,
// dw = (a a, a e, 0, ..., 0) (the zeros add exactly).
HandPasses hand_passes(const Device& device) {
  std::vector<double> x_values(8, 0.0);
  x_values[0] = kA;
  x_values[1] = kE;
  return conv_tensor_core_test::one_pixel_passes(x_values, kB, kA, device);
}

}  // namespace

TEST_CASE("conv2d bf16 cuda: fprop, dgrad, wgrad match the bf16-rounded reference",
          "[conv2d][cuda][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 511;
  for (const Conv2dShape& s : conv_tensor_core_test::odd_shapes()) {
    require_bf16_conv_matches(s, seed);
    seed += 5;
  }
}

TEST_CASE("conv2d bf16 cuda: C2F2's layers and ResNet-like 3x3 layers match the reference",
          "[conv2d][cuda][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 601;
  for (const Conv2dShape& s : conv_tensor_core_test::network_layers()) {
    require_bf16_conv_matches(s, seed);
    ++seed;
  }
}

TEST_CASE("conv2d bf16 cuda: wgrad's split-K path matches the reference", "[conv2d][cuda][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  // N P Q = 4096 over one 64 x 64 output tile: split_k.h cuts it into chunks of >= 64 steps.
  const Conv2dShape s = conv(4, 3, 32, 32, 8, 3, 3, 1, 1);
  REQUIRE(engine::kernels::conv2d_wgrad_tensor_core_cuda_workspace_size(s, Precision::Bf16) > 0);
  require_bf16_conv_matches(s, 701);
}

namespace {

// The hand-worked passes on `device`, strict under fp32 and rounded under bf16.
void check_hand_passes(const Device& device) {
  // The test's own rounding agrees with the hand-rounded operands.
  CHECK(tensor_core_test::round_to_bf16(kA) == 1.0);
  CHECK(tensor_core_test::round_to_bf16(kB) == 1.0 + power_of_two(-6));
  CHECK(tensor_core_test::round_to_bf16(kE) == 2.0);

  // Strict FP32 keeps every bit (each product and sum below is exact in FP32: at most 19
  // significant bits): a b = 1 + 2^-6 + 3 2^-16; e b = 2 + 3 2^-7 - 2^-9 - 3 2^-17;
  // y = a b + e b = 3 + 2^-6 + 3 2^-7 - 2^-9 + 3 2^-17; a a = 1 + 2^-7 + 2^-16;
  // a e = 2 + 2^-7 - 2^-9 - 2^-17.
  const double strict_ab = 1.0 + power_of_two(-6) + 3 * power_of_two(-16);
  const double strict_y =
      3.0 + power_of_two(-6) + 3 * power_of_two(-7) - power_of_two(-9) + 3 * power_of_two(-17);
  std::vector<double> dw_strict(8, 0.0);
  dw_strict[0] = 1.0 + power_of_two(-7) + power_of_two(-16);
  dw_strict[1] = 2.0 + power_of_two(-7) - power_of_two(-9) - power_of_two(-17);
  const HandPasses strict = hand_passes(device);
  CHECK(strict.y == std::vector<double>{strict_y});
  CHECK(strict.dx == std::vector<double>(8, strict_ab));
  CHECK(strict.dw == dw_strict);

  // BF16: a -> 1, b -> 1 + 2^-6, e -> 2. y = (1 + 2) (1 + 2^-6) = 3 + 3 2^-6; dx_c = 1 + 2^-6;
  // dw = (1 1, 1 2, 0, ...) = (1, 2, 0, ...).
  PrecisionScope bf16(Precision::Bf16);
  const HandPasses rounded = hand_passes(device);
  CHECK(rounded.y == std::vector<double>{3.0 + 3 * power_of_two(-6)});
  CHECK(rounded.dx == std::vector<double>(8, 1.0 + power_of_two(-6)));
  std::vector<double> dw_bf16(8, 0.0);
  dw_bf16[0] = 1.0;
  dw_bf16[1] = 2.0;
  CHECK(rounded.dw == dw_bf16);
}

}  // namespace

TEST_CASE("conv2d bf16 cuda: operands are rounded to bf16 (ties to even, carry), by hand",
          "[conv2d][cuda][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  check_hand_passes(Device::cuda());
}

TEST_CASE("conv2d bf16 cpu: operands are rounded to bf16 (ties to even, carry) as on cuda",
          "[conv2d][bf16]") {
  check_hand_passes(Device::cpu());
}

TEST_CASE("conv2d cuda: under bf16 the op runs the bf16 tensor-core kernels, forward and backward",
          "[conv2d][cuda][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  const Conv2dShape s = conv(2, 6, 9, 9, 10, 3, 3, 1, 1);
  const conv_tensor_core_test::ConvInputs in = conv_tensor_core_test::random_conv_inputs(s, 801);
  const DevicePasses kernels = conv_tensor_core_test::run_tensor_core_conv(Precision::Bf16, s, in);
  const DevicePasses strict = conv_tensor_core_test::run_tensor_core_conv(Precision::Fp32, s, in);
  engine::Conv2dOptions options;
  options.pad_h = options.pad_w = 1;

  PrecisionScope policy(Precision::Bf16);
  const Tensor x = in.x.to(Device::cuda()).set_requires_grad(true);
  const Tensor w = in.w.to(Device::cuda()).set_requires_grad(true);
  const Tensor b = in.b.to(Device::cuda()).set_requires_grad(true);
  const Tensor y = engine::conv2d(x, w, b, options);
  const std::vector<Tensor> g = engine::grad({y}, {x, w, b}, {in.dy.to(Device::cuda())});
  CHECK(y.to_vector() == kernels.y);
  CHECK(g[0].to_vector() == kernels.dx);
  CHECK(g[1].to_vector() == kernels.dw);
  CHECK(g[2].to_vector() == kernels.db);
  CHECK(kernels.y != strict.y);
  CHECK(kernels.dx != strict.dx);
  CHECK(kernels.dw != strict.dw);
}

TEST_CASE("conv2d_pool_relu cuda: under bf16 it is the unfused ops with the bf16 conv",
          "[conv2d][cuda][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  const Tensor x = random_f32({2, 3, 10, 10}, 901).to(Device::cuda());
  const Tensor w = random_f32({8, 3, 3, 3}, 902).to(Device::cuda());
  const Tensor b = random_f32({8}, 903).to(Device::cuda());
  engine::Conv2dOptions options;
  options.pad_h = options.pad_w = 1;
  const std::vector<double> fused_fp32 = engine::conv2d_pool_relu(x, w, b, options).to_vector();
  PrecisionScope bf16(Precision::Bf16);
  const std::vector<double> fused = engine::conv2d_pool_relu(x, w, b, options).to_vector();
  const std::vector<double> unfused =
      engine::relu(engine::max_pool2d(engine::conv2d(x, w, b, options), engine::Pool2dOptions{}))
          .to_vector();
  CHECK(fused == unfused);
  CHECK(fused != fused_fp32);
}
