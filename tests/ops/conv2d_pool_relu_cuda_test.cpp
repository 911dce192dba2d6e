// conv2d_pool_relu on CUDA: the fused kernels against the unfused CUDA ops (conv2d, max_pool2d,
// relu and their backward), bit for bit, and against the f64 CPU reference, over odd shapes and
// C2F2's two blocks; plus a plane of ties and NaN.
//
// Bits: the fused forward accumulates each conv value with the FMA chain and order of
// conv2d_fprop_cuda, pools with max_pool2d_forward_cuda's comparison and applies relu as
// unary_cuda does; the unpool writes what relu's and the pool's backward write; and dx, dw, db
// are conv2d's own dgrad and wgrad of that. So every output is the unfused ops' exactly.
// Against f64: reduction_tolerance(C R S) on y, (K R S) on dx and (N P Q) on dw, db, as in
// conv2d_cuda_test.cpp (a sum of L products rounds by ~sqrt(L) eps). The f64 reference routes by
// its own argmax, which a near tie in f32 could flip; random inputs of this size have none.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "tests/ops/fused_test_util.h"
#include "tests/support/allclose.h"
#include "tests/support/backend_scope.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"
#include "tests/support/tolerance.h"

using engine::Conv2dOptions;
using engine::Device;
using engine::DType;
using engine::Tensor;
using test::random_f32;

namespace {

using fused_test::conv_options;
using fused_test::require_reduction_close;
using fused_test::require_same_bits;

struct Case {
  engine::Shape x, w;
  Conv2dOptions options;
  bool bias;
};

// x, w, b (f32 values on the CPU) through the fused op and the unfused ops on CUDA, and the fused
// op on the CPU in f64; forward and every gradient for one random dy.
void require_fused_matches(const Case& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  INFO("x " << engine::shape_str(c.x) << " w " << engine::shape_str(c.w) << " stride "
            << c.options.stride_h << " pad " << c.options.pad_h << " dilation "
            << c.options.dilation_h << (c.bias ? "" : " no bias"));
  const fused_test::LeafSets leaves = fused_test::leaf_sets({x, w, b});
  const std::vector<Tensor>&fused_in = leaves.fused, &plain_in = leaves.plain, &ref_in = leaves.ref;
  auto bias_of = [&](const std::vector<Tensor>& in) { return c.bias ? in[2] : Tensor(); };
  const Tensor fused =
      engine::conv2d_pool_relu(fused_in[0], fused_in[1], bias_of(fused_in), c.options);
  const Tensor plain = engine::relu(
      engine::max_pool2d(engine::conv2d(plain_in[0], plain_in[1], bias_of(plain_in), c.options),
                         engine::Pool2dOptions{}));
  const Tensor ref = engine::conv2d_pool_relu(ref_in[0], ref_in[1], bias_of(ref_in), c.options);
  REQUIRE(fused.device().is_cuda());
  require_same_bits(fused, plain, "forward vs the unfused CUDA ops");
  const int64_t C = c.w[1], K = c.w[0], RS = c.w[2] * c.w[3];
  require_reduction_close(fused, ref, C * RS, "forward vs f64");

  const Tensor dy = random_f32(fused.shape(), 99);
  const std::vector<Tensor> g_fused = engine::grad({fused}, fused_in, {dy.to(Device::cuda())});
  const std::vector<Tensor> g_plain = engine::grad({plain}, plain_in, {dy.to(Device::cuda())});
  const std::vector<Tensor> g_ref = engine::grad({ref}, ref_in, {dy.to(DType::F64)});
  const int64_t npq = c.x[0] * fused.size(2) * fused.size(3) * 4;
  const std::vector<int64_t> lengths = {K * RS, npq, npq};
  for (size_t i = 0; i < fused_in.size(); ++i) {
    require_same_bits(g_fused[i], g_plain[i], "gradient " + std::to_string(i) + " vs unfused");
    require_reduction_close(g_fused[i], g_ref[i], lengths[i],
                            "gradient " + std::to_string(i) + " vs f64");
  }
}

}  // namespace

TEST_CASE("conv2d_pool_relu cuda: fused equals the unfused ops over odd shapes",
          "[conv2d_pool_relu][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const test::BackendScope ours(engine::ConvBackend::Ours);
  const std::vector<Case> cases = {
      {{2, 1, 28, 28}, {32, 1, 5, 5}, conv_options(1, 2), true},    // C2F2's conv1 at batch 2
      {{2, 32, 14, 14}, {64, 32, 5, 5}, conv_options(1, 2), true},  // C2F2's conv2 at batch 2
      {{3, 3, 9, 7}, {5, 3, 3, 3}, conv_options(1, 1), true},       // odd: 9x7 -> 4x3
      {{1, 2, 11, 13}, {3, 2, 3, 3}, conv_options(2, 1), false},    // stride 2: 6x7 -> 3x3
      {{2, 3, 10, 9}, {2, 3, 3, 3}, conv_options(1, 2, 2), true},   // dilation 2
      {{1, 5, 5, 6}, {7, 5, 1, 1}, conv_options(1, 0), true},       // 1x1 filters: 5x6 -> 2x3
      {{1, 1, 2, 2}, {1, 1, 1, 1}, conv_options(1, 0), true},       // one window
  };
  uint64_t seed = 200;
  for (const Case& c : cases) {
    const Tensor x = random_f32(c.x, seed++);
    const Tensor w = random_f32(c.w, seed++, -0.5, 0.5);
    const Tensor b = c.bias ? random_f32({c.w[0]}, seed++, -0.5, 0.5) : Tensor();
    require_fused_matches(c, x, w, b);
  }
}

TEST_CASE("conv2d_pool_relu cuda: ties, zeros and NaN route as the unfused ops do",
          "[conv2d_pool_relu][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // A 1x1 conv of weight 1 and bias 0 passes x through: windows of equal values (the first
  // wins), of zeros and negative zeros (relu'(0) = 0), and with a NaN (it wins and propagates).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<double> xv = {1, 1, 0,    -0.0, 2, nan, -1, -1,  //
                                  1, 1, -0.0, 0,    3, 1,   -1, -2};
  const Tensor x = Tensor::from_vector(xv, {1, 1, 2, 8}, DType::F32);
  const Tensor w = Tensor::from_vector({1.0}, {1, 1, 1, 1}, DType::F32);
  const Tensor b = Tensor::from_vector({0.0}, {1}, DType::F32);
  Tensor xf = fused_test::leaf(x, Device::cuda(), DType::F32),
         xp = fused_test::leaf(x, Device::cuda(), DType::F32);
  const Tensor wc = w.to(Device::cuda()), bc = b.to(Device::cuda());
  const Tensor fused = engine::conv2d_pool_relu(xf, wc, bc, Conv2dOptions{});
  const Tensor plain = engine::relu(
      engine::max_pool2d(engine::conv2d(xp, wc, bc, Conv2dOptions{}), engine::Pool2dOptions{}));
  require_same_bits(fused, plain, "forward");
  const std::vector<double> y = fused.to_vector();
  REQUIRE(y[0] == 1.0);
  REQUIRE(y[1] == 0.0);
  REQUIRE(std::isnan(y[2]));
  REQUIRE(y[3] == 0.0);
  const Tensor dy = Tensor::from_vector({-0.0, 5, 7, 9}, {1, 1, 1, 4}, DType::F32);
  const Tensor dx_fused = engine::grad({fused}, {xf}, {dy.to(Device::cuda())})[0];
  const Tensor dx_plain = engine::grad({plain}, {xp}, {dy.to(Device::cuda())})[0];
  require_same_bits(dx_fused, dx_plain, "dx");
  // Only the first window passes a gradient (its -0 becomes +0, as the pool's backward makes it),
  // to its first cell; the NaN window's relu passes none (NaN > 0 is false).
  std::vector<double> expected(16, 0.0);
  REQUIRE(dx_fused.to_vector() == expected);
  REQUIRE_FALSE(std::signbit(dx_fused.to_vector()[0]));
}
