// conv2d's TF32 and BF16 fprop, dgrad and wgrad on mma.sync with a three-stage cp.async pipeline
// (kernels/conv2d/conv2d_mma_cuda.cu) against a CPU reference that rounds both operands of every
// product to TF32 first (round to nearest, ties away from zero, as cvt.rna) or to BF16 (ties to
// even, as __float2bfloat16; tensor_core_test_util.h writes both with frexp and std::round or
// std::nearbyint) and sums in double: a sweep of odd sizes, padding, stride 2
// (four dgrad phases) and 3, dilation, C = 1 and C not a multiple of 4 (fprop's weights then move
// in 4-byte copies), K and C not multiples of the 64-column tile, more than one 128-row tile, and
// reductions from 1 to 603 values (the pipeline's three stages empty, full and reused many times);
// the weights at a 4-byte-only address give the same bits as at a 16-byte one; a hand-worked 1x1
// convolution whose operands round; the results differ from strict FP32; wgrad's split-K path; and
// ENGINE_TC_CONV=mma routes engine::conv2d under the tf32 and bf16 policies to these kernels. BF16
// runs the same sweep and split-K case, a hand-worked 1x1 convolution whose operands tie (to even),
// and differs from strict FP32.
//
// Tolerance (as conv2d_tf32_cuda_test.cpp): a product of two TF32 values is exact in FP32, so the
// only error is the FP32 rounding of the L additions of an output (L = C R S + 1 with the bias for
// y, at most K R S taps for dx, N P Q plus at most 64 split-K partial sums for dW), each at most
// one ulp of a partial sum (2^-23 relative) bounded by S = sum |rounded a| |rounded b| (+ |bias|):
// |got - reference| <= L 2^-23 S. An operand left unrounded misses by up to 2^-11 |a b| per term
// (2^-8 in BF16, whose products of 8-bit significands are exact in FP32 as well), far outside it
// on the short reductions and the hand-worked cases. dgrad with C <= 4 runs the
// direct FP32 kernel (as under WMMA), held to the unrounded reference with the same bound.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/common/device_counters.h"
#include "kernels/conv2d/conv2d.h"
#include "kernels/conv2d/conv2d_mma.h"
#include "tests/ops/conv2d_tensor_core_test_util.h"
#include "tests/ops/tensor_core_test_util.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"

using engine::Device;
using engine::DType;
using engine::Tensor;
using engine::TensorCoreConv;
using engine::kernels::Conv2dShape;
using engine::kernels::Precision;

namespace {

namespace k = engine::kernels;

using conv_tensor_core_test::conv;
using conv_tensor_core_test::zeros_cuda;

// `values` on the device starting `offset` floats into an allocation (offset 1: 4-byte aligned
// only, so fprop's weights must move in 4-byte copies).
Tensor on_device_at(const std::vector<double>& values, int offset) {
  std::vector<double> padded(values.size() + size_t(offset), 0.0);
  for (size_t i = 0; i < values.size(); ++i) padded[size_t(offset) + i] = values[i];
  return Tensor::from_vector(padded, {int64_t(padded.size())}, DType::F32).to(Device::cuda());
}

// fprop, dgrad and wgrad on mma.sync in `precision` vs the f64 reference on operands rounded by
// `rounding` (conv2d_tensor_core_test_util.h's check); the weights at `w_offset` floats into their
// allocation.
void require_mma_conv_matches(Precision precision,
                              const tensor_core_test::OperandRounding& rounding,
                              const Conv2dShape& s, uint64_t seed, int w_offset = 0) {
  INFO("weight offset " << w_offset);
  const conv_tensor_core_test::ConvInputs in = conv_tensor_core_test::random_conv_inputs(s, seed);
  const Tensor xd = in.x.to(Device::cuda()), bd = in.b.to(Device::cuda());
  const Tensor dyd = in.dy.to(Device::cuda());
  const Tensor wd = on_device_at(in.w.to_vector(), w_offset);
  const float* w_data = wd.data<float>() + w_offset;
  Tensor y = zeros_cuda({s.N, s.K, s.out_h(), s.out_w()});
  k::conv2d_fprop_mma_cuda(s, xd.data<float>(), w_data, bd.data<float>(), y.data<float>(),
                           precision);
  Tensor dx = zeros_cuda({s.N, s.C, s.H, s.W});
  k::conv2d_dgrad_mma_cuda(s, dyd.data<float>(), w_data, dx.data<float>(), precision);
  const int64_t scratch = k::conv2d_wgrad_mma_cuda_workspace_size(s);
  Tensor workspace = zeros_cuda({std::max<int64_t>(scratch, 1)});
  Tensor dw = zeros_cuda({s.K, s.C, s.R, s.S}), db = zeros_cuda({s.K});
  k::conv2d_wgrad_mma_cuda(s, dyd.data<float>(), xd.data<float>(), dw.data<float>(),
                           db.data<float>(), workspace.data<float>(), precision);
  conv_tensor_core_test::require_passes_match(
      rounding, s, in, {y.to_vector(), dx.to_vector(), dw.to_vector(), db.to_vector()});
}

// Sets the tensor-core convolution and the precision policy for one test and puts both back.
struct TensorCoreConvScope {
  TensorCoreConvScope(TensorCoreConv conv, Precision precision)
      : previous_conv(engine::tensor_core_conv()), previous_precision(engine::precision()) {
    engine::set_tensor_core_conv(conv);
    engine::set_precision(precision);
  }
  ~TensorCoreConvScope() {
    engine::set_tensor_core_conv(previous_conv);
    engine::set_precision(previous_precision);
  }
  TensorCoreConv previous_conv;
  Precision previous_precision;
};

// The sweep's shapes (the header's list).
std::vector<Conv2dShape> sweep_shapes() {
  return {
      conv(1, 1, 1, 1, 1, 1, 1),             // one product: a reduction of 1
      conv(3, 5, 7, 9, 6, 3, 2, 1, 1),       // odd everything, R != S, C R S = 30
      conv(2, 7, 11, 10, 70, 3, 3, 2, 1),    // stride 2 (4 phases), K over one column tile
      conv(2, 67, 9, 9, 5, 3, 3, 1, 2),      // C over one column tile, 603-long reduction
      conv(1, 9, 13, 12, 8, 3, 3, 2, 2, 2),  // dilation 2 with stride 2
      conv(3, 12, 8, 9, 16, 1, 1),           // 1x1, C R S = 12: 16-byte weight copies
      conv(2, 1, 28, 28, 32, 5, 5, 1, 2),    // C2F2 conv1: C = 1, C R S = 25, 12 row tiles
      conv(2, 3, 9, 9, 4, 5, 5, 3, 0),       // stride 3, C = 3 (direct dgrad)
      conv(1, 8, 6, 6, 7, 2, 2, 2, 1),       // stride 2, even filter: phases with 1 tap
  };
}

// require_mma_conv_matches over sweep_shapes(), seeds from `seed` on.
void require_mma_conv_sweep_matches(Precision precision,
                                    const tensor_core_test::OperandRounding& rounding,
                                    uint64_t seed) {
  for (const Conv2dShape& s : sweep_shapes()) {
    require_mma_conv_matches(precision, rounding, s, seed);
    seed += 5;
  }
}

// N P Q = 4096 over one 128 x 64 output tile: split_k.h cuts wgrad's reduction into chunks.
const Conv2dShape kSplitKShape = conv(4, 3, 32, 32, 8, 3, 3, 1, 1);

}  // namespace

TEST_CASE("conv2d mma tf32 cuda: fprop, dgrad, wgrad match the tf32-rounded reference, a sweep",
          "[conv2d][cuda][tf32][mma]") {
  REQUIRE_CUDA_OR_SKIP();
  require_mma_conv_sweep_matches(Precision::Tf32, tensor_core_test::kTf32Rounding, 31);
}

TEST_CASE("conv2d mma bf16 cuda: fprop, dgrad, wgrad match the bf16-rounded reference, a sweep",
          "[conv2d][cuda][bf16][mma]") {
  REQUIRE_CUDA_OR_SKIP();
  require_mma_conv_sweep_matches(Precision::Bf16, tensor_core_test::kBf16Rounding, 931);
  REQUIRE(k::conv2d_wgrad_mma_cuda_workspace_size(kSplitKShape) > 0);
  require_mma_conv_matches(Precision::Bf16, tensor_core_test::kBf16Rounding, kSplitKShape, 991);
}

TEST_CASE("conv2d mma tf32 cuda: wgrad's split-K path matches the reference",
          "[conv2d][cuda][tf32][mma]") {
  REQUIRE_CUDA_OR_SKIP();
  REQUIRE(k::conv2d_wgrad_mma_cuda_workspace_size(kSplitKShape) > 0);
  require_mma_conv_matches(Precision::Tf32, tensor_core_test::kTf32Rounding, kSplitKShape, 301);
}

TEST_CASE("conv2d mma tf32 cuda: weights at a 4-byte-only address give the 16-byte copies' bits",
          "[conv2d][cuda][tf32][mma]") {
  REQUIRE_CUDA_OR_SKIP();
  const Conv2dShape s = conv(2, 8, 7, 7, 9, 3, 3, 1, 1);  // C R S = 72: vectors when aligned
  require_mma_conv_matches(Precision::Tf32, tensor_core_test::kTf32Rounding, s, 401, 1);
  const Tensor x = test::random_f32({2, 8, 7, 7}, 402).to(Device::cuda());
  const std::vector<double> w = test::random_f32({9, 8, 3, 3}, 403).to_vector();
  const Tensor aligned = on_device_at(w, 0), offset = on_device_at(w, 1);
  Tensor y_aligned = zeros_cuda({2, 9, 7, 7}), y_offset = zeros_cuda({2, 9, 7, 7});
  k::conv2d_fprop_mma_cuda(s, x.data<float>(), aligned.data<float>(), nullptr,
                           y_aligned.data<float>(), Precision::Tf32);
  k::conv2d_fprop_mma_cuda(s, x.data<float>(), offset.data<float>() + 1, nullptr,
                           y_offset.data<float>(), Precision::Tf32);
  CHECK(y_aligned.to_vector() == y_offset.to_vector());
}

TEST_CASE("conv2d mma tf32 cuda: operands are rounded to tf32, by hand, and differ from fp32",
          "[conv2d][cuda][tf32][mma]") {
  REQUIRE_CUDA_OR_SKIP();
  // A 1x1 convolution of one pixel, C = 8 (above the direct dgrad's 4), K = 1: x = (a, 0, ...),
  // w = (b, ..., b), dy = a, with a = 1 + 2^-11 rounding (half way, away from zero) to 1 + 2^-10
  // and b = 1 + 2^-10 + 2^-11 to 1 + 2^-9. Then y = dx_c = a b, one product each (the zeros add
  // exactly): TF32 (1 + 2^-10)(1 + 2^-9) = 1 + 3 2^-10 + 2^-19, exact in FP32, where strict FP32
  // gives 1 + 2^-9 + 3 2^-22.
  const double a = 1.0 + std::ldexp(1.0, -11),
               b = 1.0 + std::ldexp(1.0, -10) + std::ldexp(1.0, -11);
  const double tf32_product = 1.0 + 3 * std::ldexp(1.0, -10) + std::ldexp(1.0, -19);
  std::vector<double> x_values(8, 0.0);
  x_values[0] = a;
  const Conv2dShape s = conv(1, 8, 1, 1, 1, 1, 1);
  const Tensor x = on_device_at(x_values, 0);
  const Tensor w = on_device_at(std::vector<double>(8, b), 0);
  const Tensor dy = on_device_at({a}, 0);
  Tensor y = zeros_cuda({1}), dx = zeros_cuda({8});
  k::conv2d_fprop_mma_cuda(s, x.data<float>(), w.data<float>(), nullptr, y.data<float>(),
                           Precision::Tf32);
  k::conv2d_dgrad_mma_cuda(s, dy.data<float>(), w.data<float>(), dx.data<float>(), Precision::Tf32);
  CHECK(y.to_vector() == std::vector<double>{tf32_product});
  CHECK(dx.to_vector() == std::vector<double>(8, tf32_product));

  // Random operands: some product rounds differently from strict FP32's.
  const Conv2dShape r = conv(2, 6, 9, 9, 10, 3, 3, 1, 1);
  const Tensor xr = test::random_f32({2, 6, 9, 9}, 501).to(Device::cuda());
  const Tensor wr = test::random_f32({10, 6, 3, 3}, 502).to(Device::cuda());
  const Tensor dyr = test::random_f32({2, 10, 9, 9}, 503).to(Device::cuda());
  Tensor y_mma = zeros_cuda({2, 10, 9, 9}), y_strict = zeros_cuda({2, 10, 9, 9});
  Tensor dx_mma = zeros_cuda({2, 6, 9, 9}), dx_strict = zeros_cuda({2, 6, 9, 9});
  k::conv2d_fprop_mma_cuda(r, xr.data<float>(), wr.data<float>(), nullptr, y_mma.data<float>(),
                           Precision::Tf32);
  k::conv2d_fprop_cuda(r, xr.data<float>(), wr.data<float>(), nullptr, y_strict.data<float>());
  k::conv2d_dgrad_mma_cuda(r, dyr.data<float>(), wr.data<float>(), dx_mma.data<float>(),
                           Precision::Tf32);
  k::conv2d_dgrad_cuda(r, dyr.data<float>(), wr.data<float>(), dx_strict.data<float>());
  CHECK(y_mma.to_vector() != y_strict.to_vector());
  CHECK(dx_mma.to_vector() != dx_strict.to_vector());
}

TEST_CASE("conv2d mma bf16 cuda: operands are rounded to bf16 (ties to even), by hand, not fp32",
          "[conv2d][cuda][bf16][mma]") {
  REQUIRE_CUDA_OR_SKIP();
  // A 1x1 convolution of one pixel, C = 8 (above the direct dgrad's 4), K = 1: x = (a, 0, ...),
  // w = (b, ..., b), dy = a, with a = 1 + 2^-8 half way between 1 and 1 + 2^-7, to the even 1,
  // and b = 1 + 3 2^-8 half way between 1 + 2^-7 (odd) and 1 + 2^-6 (even), up to 1 + 2^-6. Then
  // y = dx_c = a b = 1 + 2^-6 (strict FP32: 1 + 2^-6 + 3 2^-16, exact), and dw_0 = dy x_0 = a a
  // = 1 (strict: 1 + 2^-7 + 2^-16), dw_c = 0 for c > 0.
  const double a = 1.0 + std::ldexp(1.0, -8), b = 1.0 + 3 * std::ldexp(1.0, -8);
  const double bf16_product = 1.0 + std::ldexp(1.0, -6);
  std::vector<double> x_values(8, 0.0);
  x_values[0] = a;
  const Conv2dShape s = conv(1, 8, 1, 1, 1, 1, 1);
  const Tensor x = on_device_at(x_values, 0);
  const Tensor w = on_device_at(std::vector<double>(8, b), 0);
  const Tensor dy = on_device_at({a}, 0);
  Tensor y = zeros_cuda({1}), dx = zeros_cuda({8}), dw = zeros_cuda({8});
  k::conv2d_fprop_mma_cuda(s, x.data<float>(), w.data<float>(), nullptr, y.data<float>(),
                           Precision::Bf16);
  k::conv2d_dgrad_mma_cuda(s, dy.data<float>(), w.data<float>(), dx.data<float>(), Precision::Bf16);
  k::conv2d_wgrad_mma_cuda(s, dy.data<float>(), x.data<float>(), dw.data<float>(), nullptr, nullptr,
                           Precision::Bf16);
  CHECK(y.to_vector() == std::vector<double>{bf16_product});
  CHECK(dx.to_vector() == std::vector<double>(8, bf16_product));
  std::vector<double> dw_expected(8, 0.0);
  dw_expected[0] = 1.0;
  CHECK(dw.to_vector() == dw_expected);

  // Random operands: every pass differs from strict FP32 somewhere; FP32 is refused.
  const Conv2dShape r = conv(2, 6, 9, 9, 10, 3, 3, 1, 1);
  const Tensor xr = test::random_f32({2, 6, 9, 9}, 511).to(Device::cuda());
  const Tensor wr = test::random_f32({10, 6, 3, 3}, 512).to(Device::cuda());
  const Tensor dyr = test::random_f32({2, 10, 9, 9}, 513).to(Device::cuda());
  Tensor y_mma = zeros_cuda({2, 10, 9, 9}), y_strict = zeros_cuda({2, 10, 9, 9});
  Tensor dx_mma = zeros_cuda({2, 6, 9, 9}), dx_strict = zeros_cuda({2, 6, 9, 9});
  Tensor dw_mma = zeros_cuda({10, 6, 3, 3}), dw_strict = zeros_cuda({10, 6, 3, 3});
  Tensor workspace = zeros_cuda({std::max<int64_t>(k::conv2d_wgrad_mma_cuda_workspace_size(r), 1)});
  k::conv2d_fprop_mma_cuda(r, xr.data<float>(), wr.data<float>(), nullptr, y_mma.data<float>(),
                           Precision::Bf16);
  k::conv2d_fprop_cuda(r, xr.data<float>(), wr.data<float>(), nullptr, y_strict.data<float>());
  k::conv2d_dgrad_mma_cuda(r, dyr.data<float>(), wr.data<float>(), dx_mma.data<float>(),
                           Precision::Bf16);
  k::conv2d_dgrad_cuda(r, dyr.data<float>(), wr.data<float>(), dx_strict.data<float>());
  k::conv2d_wgrad_mma_cuda(r, dyr.data<float>(), xr.data<float>(), dw_mma.data<float>(), nullptr,
                           workspace.data<float>(), Precision::Bf16);
  Tensor strict_workspace =
      zeros_cuda({std::max<int64_t>(k::conv2d_wgrad_cuda_workspace_size(r), 1)});
  k::conv2d_wgrad_cuda(r, dyr.data<float>(), xr.data<float>(), dw_strict.data<float>(), nullptr,
                       strict_workspace.data<float>());
  CHECK(y_mma.to_vector() != y_strict.to_vector());
  CHECK(dx_mma.to_vector() != dx_strict.to_vector());
  CHECK(dw_mma.to_vector() != dw_strict.to_vector());
  CHECK_THROWS_WITH(k::conv2d_fprop_mma_cuda(r, xr.data<float>(), wr.data<float>(), nullptr,
                                             y_mma.data<float>(), Precision::Fp32),
                    Catch::Contains("conv2d_fprop_mma_cuda: fp32 has no mma.sync kernel"));
}

TEST_CASE("conv2d cuda: ENGINE_TC_CONV=mma runs tf32 and bf16 fprop, dgrad, wgrad on mma.sync",
          "[conv2d][cuda][tf32][bf16][mma]") {
  REQUIRE_CUDA_OR_SKIP();
  const Tensor x = test::random_f32({2, 6, 9, 9}, 601).to(Device::cuda());
  const Tensor w = test::random_f32({10, 6, 3, 3}, 602).to(Device::cuda());
  const Tensor dy = test::random_f32({2, 10, 7, 7}, 603).to(Device::cuda());
  // The launches of one conv2d and its backward, by the profiler's labels (the launch check's).
  const auto launches_of_conv = [&](TensorCoreConv choice, Precision precision) {
    TensorCoreConvScope scope(choice, precision);
    const Tensor xl = x.detach().set_requires_grad(true);
    const Tensor wl = w.detach().set_requires_grad(true);
    k::start_profile();
    const Tensor y = engine::conv2d(xl, wl, Tensor(), engine::Conv2dOptions{});
    (void)engine::grad({y}, {xl, wl}, {dy});
    std::string labels;
    for (const auto& launch : k::stop_profile()) labels += launch.label + "\n";
    return labels;
  };
  for (const Precision precision : {Precision::Tf32, Precision::Bf16}) {
    const std::string name = engine::precision_name(precision);
    INFO(name);
    const std::string with_mma = launches_of_conv(TensorCoreConv::Mma, precision);
    for (const char* pass : {"fprop", "dgrad", "wgrad"}) {
      CHECK_THAT(with_mma,
                 Catch::Contains(std::string("conv2d_") + pass + "_mma_cuda (" + name + ")"));
    }
    CHECK_THAT(with_mma, !Catch::Contains("tensor_core_cuda"));
    const std::string with_wmma = launches_of_conv(TensorCoreConv::Wmma, precision);
    for (const char* pass : {"fprop", "dgrad", "wgrad"}) {
      CHECK_THAT(with_wmma, Catch::Contains(std::string("conv2d_") + pass + "_tensor_core_cuda (" +
                                            name + ")"));
    }
    CHECK_THAT(with_wmma, !Catch::Contains("_mma_cuda"));
  }
}

TEST_CASE("tensor-core conv: the ENGINE_TC_CONV spelling", "[conv2d][backend][mma]") {
  CHECK(engine::parse_tensor_core_conv("wmma") == TensorCoreConv::Wmma);
  CHECK(engine::parse_tensor_core_conv("mma") == TensorCoreConv::Mma);
  CHECK(std::string(engine::tensor_core_conv_name(TensorCoreConv::Wmma)) == "wmma");
  CHECK(std::string(engine::tensor_core_conv_name(TensorCoreConv::Mma)) == "mma");
  CHECK_THROWS_WITH(engine::parse_tensor_core_conv("MMA", "ENGINE_TC_CONV"),
                    Catch::Contains("ENGINE_TC_CONV") &&
                        Catch::Contains("unknown tensor-core convolution 'MMA'") &&
                        Catch::Contains("'wmma' or 'mma'"));
}
