// conv2d on TF32 tensor cores (kernels/conv2d/conv2d_tensor_core_cuda.cu): fprop, dgrad and wgrad
// against a CPU reference that rounds both operands of every product to TF32 first (round to
// nearest, ties away from zero, as cvt.rna.tf32.f32; written with frexp and std::round, not with
// the emulator's bit trick) and sums in double, over odd sizes, strides, padding and dilation,
// C2F2's two layers and ResNet-like 3x3 layers; a hand-worked 1x1 convolution whose operands
// round (also on the CPU, which rounds the same operands: engine/precision.h); the dispatch of
// engine::conv2d under the precision policy (tf32 runs these kernels, fp32 the strict kernels with
// their bits unchanged, cuDNN runs in its TF32 mode); conv2d_pool_relu under tf32. The BF16
// kernels' tests are conv2d_bf16_cuda_test.cpp.
//
// Tolerance: conv2d_tensor_core_test_util.h's (FP32 summation-order error only, L 2^-23 S with L
// the reduction's length), with its reasons; the hand-worked case pins the rounding itself.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/conv2d/conv2d.h"
#include "tests/ops/conv2d_tensor_core_test_util.h"
#include "tests/ops/tensor_core_test_util.h"
#include "tests/support/backend_scope.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"

using engine::Device;
using engine::DType;
using engine::Tensor;
using engine::kernels::Conv2dShape;
using engine::kernels::Precision;
using test::random_f32;

namespace {

namespace k = engine::kernels;

using conv_tensor_core_test::conv;
using conv_tensor_core_test::HandPasses;
using conv_tensor_core_test::zeros_cuda;
using tensor_core_test::PrecisionScope;

// fprop, dgrad and wgrad (dw and db) in TF32 on the device vs the TF32-rounded f64 reference.
void require_tf32_conv_matches(const Conv2dShape& s, uint64_t seed) {
  conv_tensor_core_test::require_tensor_core_conv_matches(Precision::Tf32,
                                                          tensor_core_test::kTf32Rounding, s, seed);
}

// The hand-worked operands: a = 1 + 2^-11 rounds (half way, away from zero) to 1 + 2^-10, and
// b = 1 + 2^-10 + 2^-11 to 1 + 2^-9.
const double kA = 1.0 + std::ldexp(1.0, -11);
const double kB = 1.0 + std::ldexp(1.0, -10) + std::ldexp(1.0, -11);
// TF32: (1 + 2^-10)(1 + 2^-9) = 1 + 3 2^-10 + 2^-19. Strict FP32: (1 + 2^-11)(1 + 3 2^-11)
// = 1 + 2^-9 + 3 2^-22. Both exact in FP32.
const double kTf32Product = 1.0 + 3 * std::ldexp(1.0, -10) + std::ldexp(1.0, -19);
const double kStrictProduct = 1.0 + std::ldexp(1.0, -9) + 3 * std::ldexp(1.0, -22);
// a a: TF32 (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20; strict (1 + 2^-11)^2 = 1 + 2^-10 + 2^-22.
const double kTf32Square = 1.0 + std::ldexp(1.0, -9) + std::ldexp(1.0, -20);
const double kStrictSquare = 1.0 + std::ldexp(1.0, -10) + std::ldexp(1.0, -22);

// The engine's three passes of a 1x1 convolution of one pixel, C = 8 channels (above the direct
// dgrad's 4), K = 1: x = (a, 0, ..., 0), w = (b, ..., b), dy = a. Then y = a b, dx_c = a b for
// every c, dw = (a a, 0, ..., 0): each output one product (the zeros add exactly).
HandPasses hand_passes(const Device& device) {
  std::vector<double> x_values(8, 0.0);
  x_values[0] = kA;
  return conv_tensor_core_test::one_pixel_passes(x_values, kB, kA, device);
}

// The hand-worked passes on `device`, strict under fp32 and rounded under tf32.
void check_hand_passes(const Device& device) {
  const HandPasses strict = hand_passes(device);
  CHECK(strict.y == std::vector<double>{kStrictProduct});
  CHECK(strict.dx == std::vector<double>(8, kStrictProduct));
  std::vector<double> dw_strict(8, 0.0);
  dw_strict[0] = kStrictSquare;
  CHECK(strict.dw == dw_strict);

  PrecisionScope tf32(Precision::Tf32);
  const HandPasses rounded = hand_passes(device);
  CHECK(rounded.y == std::vector<double>{kTf32Product});
  CHECK(rounded.dx == std::vector<double>(8, kTf32Product));
  std::vector<double> dw_tf32(8, 0.0);
  dw_tf32[0] = kTf32Square;
  CHECK(rounded.dw == dw_tf32);
}

}  // namespace

TEST_CASE("conv2d tf32 cuda: fprop, dgrad, wgrad match the tf32-rounded reference",
          "[conv2d][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 11;
  for (const Conv2dShape& s : conv_tensor_core_test::odd_shapes()) {
    require_tf32_conv_matches(s, seed);
    seed += 5;
  }
}

TEST_CASE("conv2d tf32 cuda: C2F2's layers and ResNet-like 3x3 layers match the reference",
          "[conv2d][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 101;
  for (const Conv2dShape& s : conv_tensor_core_test::network_layers()) {
    require_tf32_conv_matches(s, seed);
    ++seed;
  }
}

TEST_CASE("conv2d tf32 cuda: wgrad's split-K path matches the reference", "[conv2d][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  // N P Q = 4096 over one 64 x 64 output tile: split_k.h cuts it into chunks of >= 64 steps.
  const Conv2dShape s = conv(4, 3, 32, 32, 8, 3, 3, 1, 1);
  REQUIRE(k::conv2d_wgrad_tensor_core_cuda_workspace_size(s, Precision::Tf32) > 0);
  require_tf32_conv_matches(s, 201);
}

TEST_CASE("conv2d tf32 cuda: operands are rounded to tf32 (cvt.rna), by hand, through the engine",
          "[conv2d][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  check_hand_passes(Device::cuda());
}

TEST_CASE("conv2d tf32 cpu: operands are rounded to tf32 (cvt.rna) as on cuda, by hand",
          "[conv2d][tf32]") {
  check_hand_passes(Device::cpu());
}

TEST_CASE("conv2d cuda: fp32 runs the strict kernels with their bits; tf32 the tensor-core ones",
          "[conv2d][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  const Conv2dShape s = conv(2, 6, 9, 9, 10, 3, 3, 1, 1);
  const Tensor x = random_f32({2, 6, 9, 9}, 301).to(Device::cuda());
  const Tensor w = random_f32({10, 6, 3, 3}, 302).to(Device::cuda());
  const Tensor b = random_f32({10}, 303).to(Device::cuda());
  const Tensor dy = random_f32({2, 10, 9, 9}, 304).to(Device::cuda());
  engine::Conv2dOptions options;
  options.pad_h = options.pad_w = 1;

  // The kernels called directly: strict, and tensor-core in tf32 and (forwarded) in fp32.
  struct Passes {
    std::vector<double> y, dx, dw;
  };
  auto direct = [&](bool tensor_core, Precision precision) {
    Tensor y = zeros_cuda({2, 10, 9, 9}), dx = zeros_cuda({2, 6, 9, 9});
    Tensor dw = zeros_cuda({10, 6, 3, 3});
    const int64_t scratch = tensor_core
                                ? k::conv2d_wgrad_tensor_core_cuda_workspace_size(s, precision)
                                : k::conv2d_wgrad_cuda_workspace_size(s);
    Tensor ws = zeros_cuda({std::max<int64_t>(scratch, 1)});
    if (tensor_core) {
      k::conv2d_fprop_tensor_core_cuda(s, x.data<float>(), w.data<float>(), b.data<float>(),
                                       y.data<float>(), precision);
      k::conv2d_dgrad_tensor_core_cuda(s, dy.data<float>(), w.data<float>(), dx.data<float>(),
                                       precision);
      k::conv2d_wgrad_tensor_core_cuda(s, dy.data<float>(), x.data<float>(), dw.data<float>(),
                                       nullptr, ws.data<float>(), precision);
    } else {
      k::conv2d_fprop_cuda(s, x.data<float>(), w.data<float>(), b.data<float>(), y.data<float>());
      k::conv2d_dgrad_cuda(s, dy.data<float>(), w.data<float>(), dx.data<float>());
      k::conv2d_wgrad_cuda(s, dy.data<float>(), x.data<float>(), dw.data<float>(), nullptr,
                           ws.data<float>());
    }
    return Passes{y.to_vector(), dx.to_vector(), dw.to_vector()};
  };
  // The engine's op and its backward under the current policy.
  auto through_engine = [&]() {
    const Tensor xl = x.detach().set_requires_grad(true);
    const Tensor wl = w.detach().set_requires_grad(true);
    const Tensor y = engine::conv2d(xl, wl, b, options);
    const std::vector<Tensor> g = engine::grad({y}, {xl, wl}, {dy});
    return Passes{y.to_vector(), g[0].to_vector(), g[1].to_vector()};
  };

  const Passes strict = direct(false, Precision::Fp32);
  const Passes forwarded = direct(true, Precision::Fp32);
  const Passes engine_fp32 = through_engine();
  CHECK(forwarded.y == strict.y);
  CHECK(forwarded.dx == strict.dx);
  CHECK(forwarded.dw == strict.dw);
  CHECK(engine_fp32.y == strict.y);
  CHECK(engine_fp32.dx == strict.dx);
  CHECK(engine_fp32.dw == strict.dw);

  const Passes tf32 = direct(true, Precision::Tf32);
  PrecisionScope policy(Precision::Tf32);
  const Passes engine_tf32 = through_engine();
  CHECK(engine_tf32.y == tf32.y);
  CHECK(engine_tf32.dx == tf32.dx);
  CHECK(engine_tf32.dw == tf32.dw);
  CHECK(tf32.y != strict.y);  // random operands: some product rounds differently
  CHECK(tf32.dx != strict.dx);
  CHECK(tf32.dw != strict.dw);
}

TEST_CASE("conv2d cuda: tf32 with cuDNN runs in its TF32 math mode", "[conv2d][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  const Tensor x = Tensor::full({1, 2, 3, 3}, 1.0, DType::F32, Device::cuda());
  const Tensor w = Tensor::full({1, 2, 1, 1}, 1.0, DType::F32, Device::cuda());
  if (!k::cudnn_version().empty()) {  // the emulator has no cuDNN: a GPU build checks this part
    PrecisionScope tf32(Precision::Tf32);
    test::BackendScope cudnn(engine::ConvBackend::Cudnn);
    // Every product is 1 x 1 and every sum 2, exact in TF32 and FP32 alike.
    const Tensor y = engine::conv2d(x, w, Tensor(), engine::Conv2dOptions{});
    for (double v : y.to_vector()) CHECK(v == 2.0);
  }
}

TEST_CASE("conv2d_pool_relu cuda: under tf32 it is the unfused ops with the tf32 conv",
          "[conv2d][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  const Tensor x = random_f32({2, 3, 10, 10}, 401).to(Device::cuda());
  const Tensor w = random_f32({8, 3, 3, 3}, 402).to(Device::cuda());
  const Tensor b = random_f32({8}, 403).to(Device::cuda());
  engine::Conv2dOptions options;
  options.pad_h = options.pad_w = 1;
  const std::vector<double> fused_fp32 = engine::conv2d_pool_relu(x, w, b, options).to_vector();
  PrecisionScope tf32(Precision::Tf32);
  const std::vector<double> fused = engine::conv2d_pool_relu(x, w, b, options).to_vector();
  const std::vector<double> unfused =
      engine::relu(engine::max_pool2d(engine::conv2d(x, w, b, options), engine::Pool2dOptions{}))
          .to_vector();
  CHECK(fused == unfused);
  CHECK(fused != fused_fp32);
}
