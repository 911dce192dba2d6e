// Helpers shared by the tensor-core convolution tests (conv2d_tf32_cuda_test.cpp,
// conv2d_bf16_cuda_test.cpp, conv2d_mma_cuda_test.cpp) and the CPU's emulation of them
// (conv2d_precision_cpu_test.cpp): shapes, and the check of fprop, dgrad and
// wgrad (kernels/conv2d/conv2d_tensor_core_cuda.cu) in one precision against a CPU reference that
// rounds both operands of every product as that precision does (tensor_core_test_util.h's
// roundings, written with frexp, not with the emulator's bit trick) and sums in double.
//
// Tolerance: a product of two TF32 values (at most 22 significant bits) or of two BF16 values
// (at most 16) is exact in FP32, so the kernels' only error is the FP32 rounding of their
// additions: at most L per output, L the reduction's length (C R S for y, plus one for the bias;
// at most K R S taps for dx; N P Q for dW, plus at most 64 split-K partial sums). Each addition
// errs by at most one ulp of its partial sum (2^-23 relative, allowing a tensor core that rounds
// other than to nearest inside an instruction), and every partial sum is at most
// S = sum |rounded a| |rounded b| (+ |bias|) in magnitude, so |got - reference| <= L 2^-23 S:
// FP32 summation-order error, nothing more. An operand not rounded as the mode says misses the
// reference by up to 2 u |a b| per term (u = 2^-11 for TF32, 2^-8 for BF16), far outside the
// bound on short reductions (C2F2's conv1: 25 terms); the tests' hand-worked cases pin the
// rounding itself. dgrad with C <= 4 runs the direct FP32 kernel in every mode (the kernel file's
// header says why): it is held to the unrounded reference with the same bound.
#pragma once

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/conv2d/conv2d.h"
#include "tests/ops/tensor_core_test_util.h"
#include "tests/support/tensors.h"

namespace conv_tensor_core_test {

inline engine::kernels::Conv2dShape conv(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K,
                                         int64_t R, int64_t S, int64_t stride = 1, int64_t pad = 0,
                                         int64_t dilation = 1) {
  engine::kernels::Conv2dShape s;
  s.N = N, s.C = C, s.H = H, s.W = W, s.K = K, s.R = R, s.S = S;
  s.stride_h = s.stride_w = stride;
  s.pad_h = s.pad_w = pad;
  s.dilation_h = s.dilation_w = dilation;
  return s;
}

inline std::string describe(const engine::kernels::Conv2dShape& s) {
  std::ostringstream out;
  out << "N=" << s.N << " C=" << s.C << " H=" << s.H << " W=" << s.W << " K=" << s.K << " R=" << s.R
      << " S=" << s.S << " stride=" << s.stride_h << "x" << s.stride_w << " pad=" << s.pad_h << "x"
      << s.pad_w << " dilation=" << s.dilation_h << "x" << s.dilation_w;
  return out.str();
}

// Shapes that are not multiples of the 64 x 64 x 16 tile: odd sizes, strides, padding and
// dilation, dgrad phases with and without taps, the direct dgrad (C <= 4).
inline std::vector<engine::kernels::Conv2dShape> odd_shapes() {
  return {
      conv(1, 1, 1, 1, 1, 1, 1),             // one product
      conv(3, 5, 7, 9, 6, 3, 2, 1, 1),       // odd everything, R != S
      conv(2, 7, 11, 10, 70, 3, 3, 2, 1),    // stride 2 (4 dgrad phases), K over one tile
      conv(2, 67, 9, 9, 5, 3, 3, 1, 2),      // C over one dgrad tile, padding 2
      conv(1, 9, 13, 12, 8, 3, 3, 2, 2, 2),  // dilation 2 with stride 2
      conv(2, 12, 8, 8, 16, 1, 1),           // 1x1
      conv(2, 3, 9, 9, 4, 5, 5, 3, 0),       // stride 3, C = 3 (direct dgrad)
      conv(1, 17, 5, 6, 3, 1, 1, 2),         // 1x1 stride 2: dgrad phases without taps
      conv(1, 6, 7, 7, 65, 7, 7, 2, 3),      // 7x7 stride 2, K one over a tile
  };
}

// C2F2's two layers and ResNet-like 3x3 layers.
inline std::vector<engine::kernels::Conv2dShape> network_layers() {
  return {
      conv(2, 1, 28, 28, 32, 5, 5, 1, 2),   // C2F2 conv1
      conv(2, 32, 14, 14, 64, 5, 5, 1, 2),  // C2F2 conv2
      conv(1, 64, 14, 14, 64, 3, 3, 1, 1),  // ResNet 3x3
      conv(1, 32, 15, 15, 64, 3, 3, 2, 1),  // ResNet 3x3, stride 2
  };
}

// Every element within `additions` 2^-23 magnitude[e] of the reference (the header's bound).
inline void require_within(const char* what, const std::vector<double>& got,
                           const std::vector<double>& reference,
                           const std::vector<double>& magnitude, int64_t additions) {
  REQUIRE(got.size() == reference.size());
  for (size_t e = 0; e < got.size(); ++e) {
    const double bound = double(additions) * std::ldexp(1.0, -23) * magnitude[e];
    if (std::fabs(got[e] - reference[e]) > bound) {
      FAIL(what << " element " << e << ": got " << got[e] << ", reference " << reference[e]
                << ", bound " << bound);
    }
  }
}

inline engine::Tensor zeros_cuda(const std::vector<int64_t>& shape) {
  return engine::Tensor::zeros(shape, engine::DType::F32, engine::Device::cuda());
}

// The engine's three passes (under the current precision policy) of a 1x1 convolution of one
// pixel with C = x_values.size() channels and K = 1: x = x_values, w = (w_value, ...),
// dy = dy_value; so y = sum_c x_c w, dx_c = dy w, dw_c = dy x_c. For hand-worked roundings.
struct HandPasses {
  std::vector<double> y, dx, dw;
};

inline HandPasses one_pixel_passes(const std::vector<double>& x_values, double w_value,
                                   double dy_value,
                                   const engine::Device& device = engine::Device::cuda()) {
  using engine::DType;
  using engine::Tensor;
  const int64_t C = int64_t(x_values.size());
  Tensor x = test::f64(x_values, {1, C, 1, 1}).to(DType::F32).to(device);
  Tensor w = Tensor::full({1, C, 1, 1}, w_value, DType::F32, device);
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  const Tensor y = engine::conv2d(x, w, Tensor(), engine::Conv2dOptions{});
  const Tensor dy = Tensor::full({1, 1, 1, 1}, dy_value, DType::F32, device);
  const std::vector<Tensor> g = engine::grad({y}, {x, w}, {dy});
  return {y.to_vector(), g[0].to_vector(), g[1].to_vector()};
}

// A convolution's random operands (host tensors, uniform in [-1, 1) from `seed`).
struct ConvInputs {
  engine::Tensor x, w, b, dy;
};

inline ConvInputs random_conv_inputs(const engine::kernels::Conv2dShape& s, uint64_t seed) {
  return {test::random_f32({s.N, s.C, s.H, s.W}, seed),
          test::random_f32({s.K, s.C, s.R, s.S}, seed + 1), test::random_f32({s.K}, seed + 2),
          test::random_f32({s.N, s.K, s.out_h(), s.out_w()}, seed + 3)};
}

// The three passes' outputs of one convolution on the device.
struct DevicePasses {
  std::vector<double> y, dx, dw, db;
};

// y, dx, dw and db of conv2d_*_tensor_core_cuda in `precision` (Fp32: the strict kernels, which
// those forward to).
inline DevicePasses run_tensor_core_conv(engine::kernels::Precision precision,
                                         const engine::kernels::Conv2dShape& s,
                                         const ConvInputs& in) {
  namespace k = engine::kernels;
  using engine::Device;
  using engine::Tensor;
  const Tensor x = in.x.to(Device::cuda()), w = in.w.to(Device::cuda());
  const Tensor b = in.b.to(Device::cuda()), dy = in.dy.to(Device::cuda());
  Tensor y = zeros_cuda({s.N, s.K, s.out_h(), s.out_w()});
  k::conv2d_fprop_tensor_core_cuda(s, x.data<float>(), w.data<float>(), b.data<float>(),
                                   y.data<float>(), precision);
  Tensor dx = zeros_cuda({s.N, s.C, s.H, s.W});
  k::conv2d_dgrad_tensor_core_cuda(s, dy.data<float>(), w.data<float>(), dx.data<float>(),
                                   precision);
  const int64_t scratch = k::conv2d_wgrad_tensor_core_cuda_workspace_size(s, precision);
  Tensor workspace = zeros_cuda({std::max<int64_t>(scratch, 1)});
  Tensor dw = zeros_cuda({s.K, s.C, s.R, s.S}), db = zeros_cuda({s.K});
  k::conv2d_wgrad_tensor_core_cuda(s, dy.data<float>(), x.data<float>(), dw.data<float>(),
                                   db.data<float>(), workspace.data<float>(), precision);
  return {y.to_vector(), dx.to_vector(), dw.to_vector(), db.to_vector()};
}

// y, dx, dw and db of engine::conv2d (with the bias) and its backward on `device`, under the
// current precision policy, for `in`.
inline DevicePasses engine_conv_passes(const engine::kernels::Conv2dShape& s, const ConvInputs& in,
                                       const engine::Device& device) {
  using engine::Tensor;
  Tensor x = in.x.to(device).detach(), w = in.w.to(device).detach(), b = in.b.to(device).detach();
  for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
  engine::Conv2dOptions options;
  options.stride_h = s.stride_h, options.stride_w = s.stride_w;
  options.pad_h = s.pad_h, options.pad_w = s.pad_w;
  options.dilation_h = s.dilation_h, options.dilation_w = s.dilation_w;
  const Tensor y = engine::conv2d(x, w, b, options);
  const std::vector<Tensor> g = engine::grad({y}, {x, w, b}, {in.dy.to(device)});
  return {y.to_vector(), g[0].to_vector(), g[1].to_vector(), g[2].to_vector()};
}

// The f64 reference of y, dx and dw on operands rounded by `rounding` (dgrad's unrounded for
// C <= 4: the direct FP32 kernel), each with S, its sum of product magnitudes (plus |bias|), and
// L, its number of FP32 additions: the header's bound is L 2^-23 S.
struct RoundedReference {
  std::vector<double> y, y_magnitude, dx, dx_magnitude, dw, dw_magnitude;
  int64_t y_additions, dx_additions, dw_additions;
};

inline RoundedReference rounded_reference(const tensor_core_test::OperandRounding& rounding,
                                          const engine::kernels::Conv2dShape& s,
                                          const ConvInputs& in) {
  namespace k = engine::kernels;
  using tensor_core_test::magnitudes;
  using tensor_core_test::rounded;
  const std::vector<double> xr = rounded(in.x.to_vector(), rounding);
  const std::vector<double> wr = rounded(in.w.to_vector(), rounding);
  const std::vector<double> dyr = rounded(in.dy.to_vector(), rounding), b64 = in.b.to_vector();
  RoundedReference ref;
  // fprop: C R S products and the bias.
  ref.y.resize(size_t(s.N * s.K * s.out_h() * s.out_w()));
  ref.y_magnitude.resize(ref.y.size());
  k::conv2d_fprop_cpu<double>(s, xr.data(), wr.data(), b64.data(), ref.y.data());
  k::conv2d_fprop_cpu<double>(s, magnitudes(xr).data(), magnitudes(wr).data(),
                              magnitudes(b64).data(), ref.y_magnitude.data());
  ref.y_additions = s.C * s.R * s.S + 1;

  // dgrad: at most K R S taps per pixel; C <= 4 is the direct FP32 kernel, unrounded.
  const bool direct = s.C <= 4;
  const std::vector<double> dy_used = direct ? in.dy.to_vector() : dyr;
  const std::vector<double> w_used = direct ? in.w.to_vector() : wr;
  ref.dx.resize(size_t(s.N * s.C * s.H * s.W));
  ref.dx_magnitude.resize(ref.dx.size());
  k::conv2d_dgrad_cpu<double>(s, dy_used.data(), w_used.data(), ref.dx.data());
  k::conv2d_dgrad_cpu<double>(s, magnitudes(dy_used).data(), magnitudes(w_used).data(),
                              ref.dx_magnitude.data());
  ref.dx_additions = s.K * s.R * s.S;

  // wgrad: N P Q products and at most 64 partial sums (split-K's; the CPU's chunks, at most N).
  ref.dw.resize(size_t(s.K * s.C * s.R * s.S));
  ref.dw_magnitude.resize(ref.dw.size());
  k::conv2d_wgrad_cpu<double>(s, dyr.data(), xr.data(), ref.dw.data(), nullptr);
  k::conv2d_wgrad_cpu<double>(s, magnitudes(dyr).data(), magnitudes(xr).data(),
                              ref.dw_magnitude.data(), nullptr);
  ref.dw_additions = s.N * s.out_h() * s.out_w() + 64;
  return ref;
}

// `got`'s y, dx and dw (of some convolution on `in` whose operands round as `rounding` says)
// vs rounded_reference, with the header's bound.
inline void require_rounded_passes_within(const tensor_core_test::OperandRounding& rounding,
                                          const engine::kernels::Conv2dShape& s,
                                          const ConvInputs& in, const DevicePasses& got) {
  INFO(describe(s));
  const RoundedReference ref = rounded_reference(rounding, s, in);
  require_within("y", got.y, ref.y, ref.y_magnitude, ref.y_additions);
  require_within("dx", got.dx, ref.dx, ref.dx_magnitude, ref.dx_additions);
  require_within("dw", got.dw, ref.dw, ref.dw_magnitude, ref.dw_additions);
}

// require_rounded_passes_within for the tensor-core kernels' `got`, and db must be
// conv2d_wgrad_cuda's FP32 sum, bit for bit.
inline void require_passes_match(const tensor_core_test::OperandRounding& rounding,
                                 const engine::kernels::Conv2dShape& s, const ConvInputs& in,
                                 const DevicePasses& got) {
  namespace k = engine::kernels;
  require_rounded_passes_within(rounding, s, in, got);
  INFO(describe(s));
  const engine::Tensor xd = in.x.to(engine::Device::cuda()), dyd = in.dy.to(engine::Device::cuda());
  engine::Tensor db_strict = zeros_cuda({s.K});
  k::conv2d_wgrad_cuda(s, dyd.data<float>(), xd.data<float>(), nullptr, db_strict.data<float>(),
                       nullptr);
  CHECK(got.db == db_strict.to_vector());
}

// fprop, dgrad and wgrad by the WMMA tensor-core kernels in `precision` (Tf32 or Bf16) on
// random_conv_inputs(s, seed), held to require_passes_match. Returns what the kernels gave.
inline DevicePasses require_tensor_core_conv_matches(
    engine::kernels::Precision precision, const tensor_core_test::OperandRounding& rounding,
    const engine::kernels::Conv2dShape& s, uint64_t seed) {
  const ConvInputs in = random_conv_inputs(s, seed);
  const DevicePasses got = run_tensor_core_conv(precision, s, in);
  require_passes_match(rounding, s, in, got);
  return got;
}

}  // namespace conv_tensor_core_test
