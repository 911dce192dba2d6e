// conv2d on TF32 tensor cores (kernels/conv2d/conv2d_tensor_core_cuda.cu): fprop, dgrad and wgrad
// against a CPU reference that rounds both operands of every product to TF32 first (round to
// nearest, ties away from zero, as cvt.rna.tf32.f32; written with frexp and std::round, not with
// the emulator's bit trick) and sums in double, over odd sizes, strides, padding and dilation,
// C2F2's two layers and ResNet-like 3x3 layers; a hand-worked 1x1 convolution whose operands
// round; the dispatch of engine::conv2d under the precision policy (tf32 runs these kernels, fp32
// the strict kernels with their bits unchanged, cuDNN refuses tf32); conv2d_pool_relu under tf32.
//
// Tolerance: a product of two TF32 values has at most 22 significant bits, so it is exact in FP32,
// and the kernels' only error is the FP32 rounding of their additions: at most L per output, L the
// reduction's length (C R S for y, plus one for the bias; at most K R S taps for dx; N P Q for dW,
// plus at most 64 split-K partial sums). Each addition errs by at most one ulp of its partial sum
// (2^-23 relative, allowing a tensor core that rounds other than to nearest inside an
// instruction), and every partial sum is at most S = sum |rounded a| |rounded b| (+ |bias|) in
// magnitude, so |got - reference| <= L 2^-23 S: FP32 summation-order error, nothing more. An
// operand not rounded to TF32 misses the reference by up to 2^-11 |a b| per term, far outside the
// bound on the short reductions (C2F2's conv1: 25 terms) and on the hand-worked case, which pins
// the rounding itself. dgrad with C <= 4 runs the direct FP32 kernel (the kernel's header says
// why): it is held to the unrounded reference with the same bound.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>
#include <vector>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/conv2d/conv2d.h"
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

using tensor_core_test::magnitudes;
using tensor_core_test::PrecisionScope;
using tensor_core_test::round_to_tf32;

std::vector<double> rounded_to_tf32(std::vector<double> values) {
  return tensor_core_test::rounded(std::move(values), tensor_core_test::kTf32Rounding);
}

Conv2dShape conv(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S,
                 int64_t stride = 1, int64_t pad = 0, int64_t dilation = 1) {
  Conv2dShape s;
  s.N = N, s.C = C, s.H = H, s.W = W, s.K = K, s.R = R, s.S = S;
  s.stride_h = s.stride_w = stride;
  s.pad_h = s.pad_w = pad;
  s.dilation_h = s.dilation_w = dilation;
  return s;
}

std::string describe(const Conv2dShape& s) {
  std::ostringstream out;
  out << "N=" << s.N << " C=" << s.C << " H=" << s.H << " W=" << s.W << " K=" << s.K << " R=" << s.R
      << " S=" << s.S << " stride=" << s.stride_h << "x" << s.stride_w << " pad=" << s.pad_h << "x"
      << s.pad_w << " dilation=" << s.dilation_h << "x" << s.dilation_w;
  return out.str();
}

// Every element within `additions` 2^-23 magnitude[e] of the reference (the header's bound).
void require_within(const char* what, const std::vector<double>& got,
                    const std::vector<double>& reference, const std::vector<double>& magnitude,
                    int64_t additions) {
  REQUIRE(got.size() == reference.size());
  for (size_t e = 0; e < got.size(); ++e) {
    const double bound = double(additions) * std::ldexp(1.0, -23) * magnitude[e];
    if (std::fabs(got[e] - reference[e]) > bound) {
      FAIL(what << " element " << e << ": got " << got[e] << ", reference " << reference[e]
                << ", bound " << bound);
    }
  }
}

Tensor zeros_cuda(const std::vector<int64_t>& shape) {
  return Tensor::zeros(shape, DType::F32, Device::cuda());
}

// fprop, dgrad and wgrad (dw and db) in TF32 on the device vs the TF32-rounded f64 reference.
void require_tf32_conv_matches(const Conv2dShape& s, uint64_t seed) {
  INFO(describe(s));
  const int64_t P = s.out_h(), Q = s.out_w();
  const Tensor x = random_f32({s.N, s.C, s.H, s.W}, seed);
  const Tensor w = random_f32({s.K, s.C, s.R, s.S}, seed + 1);
  const Tensor b = random_f32({s.K}, seed + 2);
  const Tensor dy = random_f32({s.N, s.K, P, Q}, seed + 3);
  const std::vector<double> xr = rounded_to_tf32(x.to_vector()),
                            wr = rounded_to_tf32(w.to_vector());
  const std::vector<double> dyr = rounded_to_tf32(dy.to_vector()), b64 = b.to_vector();
  const Tensor xd = x.to(Device::cuda()), wd = w.to(Device::cuda()), bd = b.to(Device::cuda());
  const Tensor dyd = dy.to(Device::cuda());

  // fprop: C R S products and the bias.
  std::vector<double> y_ref(size_t(s.N * s.K * P * Q)), y_mag(y_ref.size());
  k::conv2d_fprop_cpu<double>(s, xr.data(), wr.data(), b64.data(), y_ref.data());
  k::conv2d_fprop_cpu<double>(s, magnitudes(xr).data(), magnitudes(wr).data(),
                              magnitudes(b64).data(), y_mag.data());
  Tensor y = zeros_cuda({s.N, s.K, P, Q});
  k::conv2d_fprop_tensor_core_cuda(s, xd.data<float>(), wd.data<float>(), bd.data<float>(),
                                   y.data<float>(), Precision::Tf32);
  require_within("y", y.to_vector(), y_ref, y_mag, s.C * s.R * s.S + 1);

  // dgrad: at most K R S taps per pixel; C <= 4 is the direct FP32 kernel, unrounded.
  const bool direct = s.C <= 4;
  const std::vector<double> dy_used = direct ? dy.to_vector() : dyr;
  const std::vector<double> w_used = direct ? w.to_vector() : wr;
  std::vector<double> dx_ref(size_t(s.N * s.C * s.H * s.W)), dx_mag(dx_ref.size());
  k::conv2d_dgrad_cpu<double>(s, dy_used.data(), w_used.data(), dx_ref.data());
  k::conv2d_dgrad_cpu<double>(s, magnitudes(dy_used).data(), magnitudes(w_used).data(),
                              dx_mag.data());
  Tensor dx = zeros_cuda({s.N, s.C, s.H, s.W});
  k::conv2d_dgrad_tensor_core_cuda(s, dyd.data<float>(), wd.data<float>(), dx.data<float>(),
                                   Precision::Tf32);
  require_within("dx", dx.to_vector(), dx_ref, dx_mag, s.K * s.R * s.S);

  // wgrad: N P Q products and at most 64 partial sums; db is conv2d_wgrad_cuda's FP32 sum, bits.
  std::vector<double> dw_ref(size_t(s.K * s.C * s.R * s.S)), dw_mag(dw_ref.size());
  k::conv2d_wgrad_cpu<double>(s, dyr.data(), xr.data(), dw_ref.data(), nullptr);
  k::conv2d_wgrad_cpu<double>(s, magnitudes(dyr).data(), magnitudes(xr).data(), dw_mag.data(),
                              nullptr);
  const int64_t scratch = k::conv2d_wgrad_tensor_core_cuda_workspace_size(s, Precision::Tf32);
  Tensor workspace = zeros_cuda({std::max<int64_t>(scratch, 1)});
  Tensor dw = zeros_cuda({s.K, s.C, s.R, s.S}), db = zeros_cuda({s.K});
  k::conv2d_wgrad_tensor_core_cuda(s, dyd.data<float>(), xd.data<float>(), dw.data<float>(),
                                   db.data<float>(), workspace.data<float>(), Precision::Tf32);
  require_within("dw", dw.to_vector(), dw_ref, dw_mag, s.N * P * Q + 64);
  Tensor db_strict = zeros_cuda({s.K});
  k::conv2d_wgrad_cuda(s, dyd.data<float>(), xd.data<float>(), nullptr, db_strict.data<float>(),
                       nullptr);
  CHECK(db.to_vector() == db_strict.to_vector());
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
struct HandPasses {
  std::vector<double> y, dx, dw;
};

HandPasses hand_passes() {
  std::vector<double> x_values(8, 0.0);
  x_values[0] = kA;
  Tensor x = test::f64(x_values, {1, 8, 1, 1}).to(DType::F32).to(Device::cuda());
  Tensor w = Tensor::full({1, 8, 1, 1}, kB, DType::F32, Device::cuda());
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  const Tensor y = engine::conv2d(x, w, Tensor(), engine::Conv2dOptions{});
  const Tensor dy = Tensor::full({1, 1, 1, 1}, kA, DType::F32, Device::cuda());
  const std::vector<Tensor> g = engine::grad({y}, {x, w}, {dy});
  return {y.to_vector(), g[0].to_vector(), g[1].to_vector()};
}

}  // namespace

TEST_CASE("conv2d tf32 cuda: fprop, dgrad, wgrad match the tf32-rounded reference",
          "[conv2d][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 11;
  for (const Conv2dShape& s : {
           conv(1, 1, 1, 1, 1, 1, 1),             // one product
           conv(3, 5, 7, 9, 6, 3, 2, 1, 1),       // odd everything, R != S
           conv(2, 7, 11, 10, 70, 3, 3, 2, 1),    // stride 2 (4 dgrad phases), K over one tile
           conv(2, 67, 9, 9, 5, 3, 3, 1, 2),      // C over one dgrad tile, padding 2
           conv(1, 9, 13, 12, 8, 3, 3, 2, 2, 2),  // dilation 2 with stride 2
           conv(2, 12, 8, 8, 16, 1, 1),           // 1x1
           conv(2, 3, 9, 9, 4, 5, 5, 3, 0),       // stride 3, C = 3 (direct dgrad)
       }) {
    require_tf32_conv_matches(s, seed);
    seed += 5;
  }
}

TEST_CASE("conv2d tf32 cuda: C2F2's layers and ResNet-like 3x3 layers match the reference",
          "[conv2d][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  require_tf32_conv_matches(conv(2, 1, 28, 28, 32, 5, 5, 1, 2), 101);   // C2F2 conv1
  require_tf32_conv_matches(conv(2, 32, 14, 14, 64, 5, 5, 1, 2), 102);  // C2F2 conv2
  require_tf32_conv_matches(conv(1, 64, 14, 14, 64, 3, 3, 1, 1), 103);  // ResNet 3x3
  require_tf32_conv_matches(conv(1, 32, 15, 15, 64, 3, 3, 2, 1), 104);  // ResNet 3x3, stride 2
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
  const HandPasses strict = hand_passes();
  CHECK(strict.y == std::vector<double>{kStrictProduct});
  CHECK(strict.dx == std::vector<double>(8, kStrictProduct));
  std::vector<double> dw_strict(8, 0.0);
  dw_strict[0] = kStrictSquare;
  CHECK(strict.dw == dw_strict);

  PrecisionScope tf32(Precision::Tf32);
  const HandPasses rounded = hand_passes();
  CHECK(rounded.y == std::vector<double>{kTf32Product});
  CHECK(rounded.dx == std::vector<double>(8, kTf32Product));
  std::vector<double> dw_tf32(8, 0.0);
  dw_tf32[0] = kTf32Square;
  CHECK(rounded.dw == dw_tf32);
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

TEST_CASE("conv2d cuda: tf32 with cuDNN runs in its TF32 math mode, bf16 has no tensor-core conv",
          "[conv2d][cuda][tf32]") {
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
  const Conv2dShape s = conv(1, 2, 3, 3, 1, 1, 1);
  Tensor y = zeros_cuda({1, 1, 3, 3});
  CHECK_THROWS_WITH(k::conv2d_fprop_tensor_core_cuda(s, x.data<float>(), w.data<float>(), nullptr,
                                                     y.data<float>(), Precision::Bf16),
                    Catch::Contains("bf16 is not implemented yet"));
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
