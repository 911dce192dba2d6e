// conv2d: the fast im2col path against the naive reference (kernel level), hand-computed forward
// cases, finite-difference gradients in f64, gradient selectivity, and error messages.
#include <omp.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/conv2d/conv2d.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"

namespace {

using engine::Conv2dOptions;
using engine::DType;
using engine::Tensor;
using engine::kernels::Conv2dShape;

// How many elements of two buffers differ in any bit (0: bit-identical); a count, so a failure
// does not print whole buffers.
int64_t count_differing(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return -1;
  int64_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return differing;
}

std::vector<double> random_values(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> values(static_cast<size_t>(n));
  for (double& v : values) v = uniform(gen);
  return values;
}

// Random f32 operands of one convolution, values in [-1, 1]: x, w, dy and bias from the seeds
// seed, seed + 1, seed + 2 and seed + 3.
struct F32Operands {
  std::vector<float> x, w, dy, bias;
};

F32Operands random_f32_operands(const Conv2dShape& s, uint64_t seed) {
  auto random_floats = [](int64_t n, uint64_t from) {
    const std::vector<double> v = random_values(n, from);
    return std::vector<float>(v.begin(), v.end());
  };
  return {random_floats(s.N * s.C * s.H * s.W, seed),
          random_floats(s.K * s.C * s.R * s.S, seed + 1),
          random_floats(s.N * s.K * s.out_h() * s.out_w(), seed + 2), random_floats(s.K, seed + 3)};
}

std::string describe(const Conv2dShape& s) {
  std::ostringstream out;
  out << "N=" << s.N << " C=" << s.C << " H=" << s.H << " W=" << s.W << " K=" << s.K << " R=" << s.R
      << " S=" << s.S << " stride=" << s.stride_h << "x" << s.stride_w << " pad=" << s.pad_h << "x"
      << s.pad_w << " dilation=" << s.dilation_h << "x" << s.dilation_w;
  return out.str();
}

// Runs fprop, dgrad and wgrad (with db) through both CPU paths in f64 and requires agreement to
// 1e-10. Outputs start as NaN so a path that forgets to write an element fails.
void require_fast_matches_reference(const Conv2dShape& s) {
  INFO(describe(s));
  const int64_t P = s.out_h(), Q = s.out_w();
  REQUIRE(P >= 1);
  REQUIRE(Q >= 1);
  const int64_t x_size = s.N * s.C * s.H * s.W, w_size = s.K * s.C * s.R * s.S;
  const int64_t y_size = s.N * s.K * P * Q;
  const std::vector<double> x = random_values(x_size, 1), w = random_values(w_size, 2);
  const std::vector<double> bias = random_values(s.K, 3), dy = random_values(y_size, 4);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  using namespace engine::kernels;

  std::vector<double> y_ref(y_size, nan), y_fast(y_size, nan);
  conv2d_fprop_cpu(s, x.data(), w.data(), bias.data(), y_ref.data());
  conv2d_fprop_fast_cpu(s, x.data(), w.data(), bias.data(), y_fast.data());
  test::require_close(y_fast, y_ref, 1e-10, 1e-10, "fprop with bias");
  conv2d_fprop_cpu<double>(s, x.data(), w.data(), nullptr, y_ref.data());
  conv2d_fprop_fast_cpu<double>(s, x.data(), w.data(), nullptr, y_fast.data());
  test::require_close(y_fast, y_ref, 1e-10, 1e-10, "fprop without bias");

  std::vector<double> dx_ref(x_size, nan), dx_fast(x_size, nan);
  conv2d_dgrad_cpu(s, dy.data(), w.data(), dx_ref.data());
  conv2d_dgrad_fast_cpu(s, dy.data(), w.data(), dx_fast.data());
  test::require_close(dx_fast, dx_ref, 1e-10, 1e-10, "dgrad");

  std::vector<double> dw_ref(w_size, nan), dw_fast(w_size, nan);
  std::vector<double> db_ref(s.K, nan), db_fast(s.K, nan);
  conv2d_wgrad_cpu(s, dy.data(), x.data(), dw_ref.data(), db_ref.data());
  conv2d_wgrad_fast_cpu(s, dy.data(), x.data(), dw_fast.data(), db_fast.data());
  test::require_close(dw_fast, dw_ref, 1e-10, 1e-10, "wgrad dw");
  test::require_close(db_fast, db_ref, 1e-10, 1e-10, "wgrad db");
}

Conv2dShape make_shape(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S,
                       int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w,
                       int64_t dilation_h, int64_t dilation_w) {
  Conv2dShape s;
  s.N = N, s.C = C, s.H = H, s.W = W, s.K = K, s.R = R, s.S = S;
  s.stride_h = stride_h, s.stride_w = stride_w, s.pad_h = pad_h, s.pad_w = pad_w;
  s.dilation_h = dilation_h, s.dilation_w = dilation_w;
  return s;
}

Conv2dOptions make_options(int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w,
                           int64_t dilation_h, int64_t dilation_w) {
  Conv2dOptions o;
  o.stride_h = stride_h, o.stride_w = stride_w, o.pad_h = pad_h, o.pad_w = pad_w;
  o.dilation_h = dilation_h, o.dilation_w = dilation_w;
  return o;
}

// The 3x3 image used by the hand-computed cases:  1 2 3 / 4 5 6 / 7 8 9.
Tensor image_1_to_9(DType dtype = DType::F64) {
  return Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, dtype);
}

// Gradient check of conv2d with respect to x, weight and bias (when given) in f64.
void require_conv2d_gradcheck(const engine::Shape& x_shape, const engine::Shape& w_shape,
                              bool with_bias, const Conv2dOptions& options) {
  std::vector<Tensor> inputs = {test::random_leaf(x_shape, 11), test::random_leaf(w_shape, 12),
                                with_bias ? test::random_leaf({w_shape[0]}, 13) : Tensor()};
  test::require_gradcheck(
      [options](const std::vector<Tensor>& in) {
        return engine::conv2d(in[0], in[1], in[2], options);
      },
      inputs);
}

}  // namespace

// ---- kernel level: fast path vs reference ------------------------------------------------------

TEST_CASE("conv2d kernels: fast path matches the reference over strides, paddings, dilations",
          "[conv2d][kernels]") {
  for (int64_t kernel : {1, 3, 5}) {
    for (int64_t stride = 1; stride <= 3; ++stride) {
      for (int64_t pad = 0; pad <= 2; ++pad) {
        for (int64_t dilation = 1; dilation <= 2; ++dilation) {
          // Odd sizes, H != W; skip geometries where the dilated kernel does not fit.
          if (dilation * (kernel - 1) + 1 > 8 + 2 * pad) continue;
          require_fast_matches_reference(make_shape(2, 3, 9, 8, 4, kernel, kernel, stride, stride,
                                                    pad, pad, dilation, dilation));
        }
      }
    }
  }
}

TEST_CASE("conv2d kernels: fast path matches the reference on special shapes",
          "[conv2d][kernels]") {
  // ResNet stem: 7x7, stride 2, padding 3, on a small odd-sized RGB image.
  require_fast_matches_reference(make_shape(2, 3, 23, 21, 8, 7, 7, 2, 2, 3, 3, 1, 1));
  // 1x1 with stride 1 and no padding (im2col skipped), with stride 2 (downsample), with padding.
  require_fast_matches_reference(make_shape(3, 5, 6, 7, 4, 1, 1, 1, 1, 0, 0, 1, 1));
  require_fast_matches_reference(make_shape(3, 5, 7, 7, 4, 1, 1, 2, 2, 0, 0, 1, 1));
  require_fast_matches_reference(make_shape(2, 2, 4, 5, 3, 1, 1, 1, 1, 1, 2, 1, 1));
  // Non-square kernels and mixed options per axis.
  require_fast_matches_reference(make_shape(2, 2, 7, 9, 3, 3, 1, 1, 2, 0, 2, 2, 1));
  require_fast_matches_reference(make_shape(2, 3, 8, 6, 2, 2, 5, 3, 1, 1, 2, 1, 2));
  // One image (runs on one thread), an odd batch, one channel in and out.
  require_fast_matches_reference(make_shape(1, 4, 10, 10, 6, 3, 3, 1, 1, 1, 1, 1, 1));
  require_fast_matches_reference(make_shape(5, 1, 6, 6, 1, 3, 3, 2, 2, 1, 1, 1, 1));
  // Large enough (> 2^20 FLOPs) for the OpenMP path over the batch, wgrad's chunks of images
  // included; a pointwise one too.
  require_fast_matches_reference(make_shape(4, 8, 12, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1));
  require_fast_matches_reference(make_shape(6, 32, 10, 10, 32, 1, 1, 1, 1, 0, 0, 1, 1));
  // More images than wgrad's 16 chunks, so the chunks hold one or two images each.
  require_fast_matches_reference(make_shape(19, 4, 9, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1));
  // The kernel exactly covers the padded input: a 1x1 output.
  require_fast_matches_reference(make_shape(2, 2, 3, 3, 3, 5, 5, 1, 1, 1, 1, 1, 1));
  // Padding wider than the image: the outer kernel columns and rows never touch it (im2col's
  // in-image column range is empty for them), with strides 1 and 2.
  require_fast_matches_reference(make_shape(2, 2, 2, 2, 3, 5, 5, 1, 1, 2, 2, 1, 1));
  require_fast_matches_reference(make_shape(2, 2, 3, 2, 3, 5, 5, 2, 2, 3, 3, 1, 1));
  // Empty batch: nothing to compute, dw and db are zero.
  Conv2dShape empty = make_shape(0, 2, 4, 4, 3, 3, 3, 1, 1, 1, 1, 1, 1);
  std::vector<double> dw(3 * 2 * 3 * 3, 7.0), db(3, 7.0);
  engine::kernels::conv2d_wgrad_fast_cpu<double>(empty, nullptr, nullptr, dw.data(), db.data());
  test::require_close(dw, std::vector<double>(dw.size(), 0.0), 0, 0, "dw of an empty batch");
  test::require_close(db, std::vector<double>(db.size(), 0.0), 0, 0, "db of an empty batch");
}

TEST_CASE("conv2d kernels: fast path gives the same bits on one thread and on four",
          "[conv2d][kernels]") {
  // An odd batch large enough for the OpenMP path (wgrad sums fixed chunks of images), and one
  // image whose GEMMs have an inner dimension C R S = 540, longer than one block (a threaded
  // Eigen GEMM would cut it at 288, a single-threaded one at 272).
  for (const Conv2dShape& s : {make_shape(37, 8, 12, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1),
                               make_shape(1, 60, 16, 15, 64, 3, 3, 1, 1, 1, 1, 1, 1)}) {
    INFO(describe(s));
    const F32Operands in = random_f32_operands(s, 21);
    const std::vector<float>& x = in.x;
    const std::vector<float>& w = in.w;
    const std::vector<float>& dy = in.dy;
    auto run = [&](int threads) {
      std::vector<float> y(dy.size()), dx(x.size()), dw(w.size()), db(s.K);
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads);
      using namespace engine::kernels;
      conv2d_fprop_fast_cpu<float>(s, x.data(), w.data(), in.bias.data(), y.data());
      conv2d_dgrad_fast_cpu<float>(s, dy.data(), w.data(), dx.data());
      conv2d_wgrad_fast_cpu<float>(s, dy.data(), x.data(), dw.data(), db.data());
      omp_set_num_threads(saved);
      return std::vector<std::vector<float>>{y, dx, dw, db};
    };
    const std::vector<std::vector<float>> one = run(1), four = run(4);
    CHECK(count_differing(one[0], four[0]) == 0);  // y
    CHECK(count_differing(one[1], four[1]) == 0);  // dx
    CHECK(count_differing(one[2], four[2]) == 0);  // dw
    CHECK(count_differing(one[3], four[3]) == 0);  // db
  }
}

TEST_CASE("conv2d kernels: f32 fast path matches the f32 reference", "[conv2d][kernels]") {
  Conv2dShape s = make_shape(2, 3, 9, 9, 4, 3, 3, 2, 2, 1, 1, 1, 1);
  const F32Operands in = random_f32_operands(s, 5);
  const std::vector<float>& x = in.x;
  const std::vector<float>& w = in.w;
  const std::vector<float>& dy = in.dy;
  std::vector<float> y_ref(dy.size()), y_fast(dy.size()), dx_ref(x.size()), dx_fast(x.size());
  std::vector<float> dw_ref(w.size()), dw_fast(w.size());
  using namespace engine::kernels;
  conv2d_fprop_cpu<float>(s, x.data(), w.data(), nullptr, y_ref.data());
  conv2d_fprop_fast_cpu<float>(s, x.data(), w.data(), nullptr, y_fast.data());
  conv2d_dgrad_cpu<float>(s, dy.data(), w.data(), dx_ref.data());
  conv2d_dgrad_fast_cpu<float>(s, dy.data(), w.data(), dx_fast.data());
  conv2d_wgrad_cpu<float>(s, dy.data(), x.data(), dw_ref.data(), nullptr);
  conv2d_wgrad_fast_cpu<float>(s, dy.data(), x.data(), dw_fast.data(), nullptr);
  auto to_double = [](const std::vector<float>& v) {
    return std::vector<double>(v.begin(), v.end());
  };
  // Sums of up to 27 (fprop, dgrad) or 50 (wgrad) products of magnitude <= 1.
  test::require_close(to_double(y_fast), to_double(y_ref), 1e-5, 1e-5, "f32 fprop");
  test::require_close(to_double(dx_fast), to_double(dx_ref), 1e-5, 1e-5, "f32 dgrad");
  test::require_close(to_double(dw_fast), to_double(dw_ref), 1e-5, 1e-5, "f32 wgrad");
}

// ---- op level: hand-computed forward cases -----------------------------------------------------

TEST_CASE("conv2d forward: 3x3 input, 2x2 kernel, stride 1, with bias", "[conv2d]") {
  // x = 1 2 3 / 4 5 6 / 7 8 9, w = 1 2 / 3 4, b = 1. y[p,q] = 1 + sum x[p+r,q+s] w[r,s]:
  //   y[0,0] = 1 + 1*1 + 2*2 + 4*3 + 5*4 = 38      y[0,1] = 1 + 2*1 + 3*2 + 5*3 + 6*4 = 48
  //   y[1,0] = 1 + 4*1 + 5*2 + 7*3 + 8*4 = 68      y[1,1] = 1 + 5*1 + 6*2 + 8*3 + 9*4 = 78
  for (DType dtype : {DType::F64, DType::F32}) {
    Tensor w = Tensor::from_vector({1, 2, 3, 4}, {1, 1, 2, 2}, dtype);
    Tensor b = Tensor::from_vector({1}, {1}, dtype);
    Tensor y = engine::conv2d(image_1_to_9(dtype), w, b);
    REQUIRE(y.shape() == engine::Shape{1, 1, 2, 2});
    REQUIRE(y.dtype() == dtype);
    test::require_close(y, {38, 48, 68, 78}, 0, 0);
  }
}

TEST_CASE("conv2d forward: 3x3 input, 2x2 kernel, stride 2, padding 1, no bias", "[conv2d]") {
  // Padded input (5x5): a zero border around 1..9. Output (3 + 2 - 2) / 2 + 1 = 2 per side;
  // windows start at padded rows/cols 0 and 2, w = 1 2 / 3 4:
  //   (0,0): 0 0 / 0 1 -> 1*4 = 4              (0,2): 0 0 / 2 3 -> 2*3 + 3*4 = 18
  //   (2,0): 0 4 / 0 7 -> 4*2 + 7*4 = 36       (2,2): 5 6 / 8 9 -> 5 + 12 + 24 + 36 = 77
  Tensor w = Tensor::from_vector({1, 2, 3, 4}, {1, 1, 2, 2}, DType::F64);
  Tensor y = engine::conv2d(image_1_to_9(), w, Tensor(), make_options(2, 2, 1, 1, 1, 1));
  REQUIRE(y.shape() == engine::Shape{1, 1, 2, 2});
  test::require_close(y, {4, 18, 36, 77}, 0, 0);
}

TEST_CASE("conv2d forward: 3x3 input, 2x2 kernel, stride 1, padding 1", "[conv2d]") {
  // Output 4x4; the corners see one pixel each, times the opposite kernel corner:
  //   y[0,0] = x[0,0] w[1,1] = 1*4 = 4         y[0,3] = x[0,2] w[1,0] = 3*3 = 9
  //   y[3,0] = x[2,0] w[0,1] = 7*2 = 14        y[3,3] = x[2,2] w[0,0] = 9*1 = 9
  // Top edge y[0,1] = x[0,0] w[1,0] + x[0,1] w[1,1] = 3 + 8 = 11, y[0,2] = 2*3 + 3*4 = 18;
  // bottom edge y[3,1] = 7*1 + 8*2 = 23, y[3,2] = 8 + 18 = 26; left edge y[1,0] = 1*2 + 4*4 = 18,
  // y[2,0] = 4*2 + 7*4 = 36; right edge y[1,3] = 3*1 + 6*3 = 21, y[2,3] = 6 + 27 = 33;
  // the interior is the stride-1 valid result 37 47 / 67 77.
  Tensor w = Tensor::from_vector({1, 2, 3, 4}, {1, 1, 2, 2}, DType::F64);
  Tensor y = engine::conv2d(image_1_to_9(), w, Tensor(), make_options(1, 1, 1, 1, 1, 1));
  REQUIRE(y.shape() == engine::Shape{1, 1, 4, 4});
  test::require_close(y, {4, 11, 18, 9, 18, 37, 47, 21, 36, 67, 77, 33, 14, 23, 26, 9}, 0, 0);
}

TEST_CASE("conv2d forward: dilation 2 spreads a 2x2 kernel over the 3x3 corners", "[conv2d]") {
  // Dilated span 3x3 -> one output: x[0,0]*1 + x[0,2]*2 + x[2,0]*3 + x[2,2]*4 = 1+6+21+36 = 64.
  Tensor w = Tensor::from_vector({1, 2, 3, 4}, {1, 1, 2, 2}, DType::F64);
  Tensor y = engine::conv2d(image_1_to_9(), w, Tensor(), make_options(1, 1, 0, 0, 2, 2));
  REQUIRE(y.shape() == engine::Shape{1, 1, 1, 1});
  test::require_close(y, {64}, 0, 0);
}

TEST_CASE("conv2d forward: two channels, three 1x1 filters mix channels", "[conv2d]") {
  // x channel 0 = 1 2 / 3 4, channel 1 = 10 20 / 30 40; filters (w[k,0], w[k,1]) = (1,0), (0,1),
  // (1,-1); bias 0, 0, 0.5: y0 = channel 0, y1 = channel 1, y2 = channel 0 - channel 1 + 0.5.
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 10, 20, 30, 40}, {1, 2, 2, 2}, DType::F64);
  Tensor w = Tensor::from_vector({1, 0, 0, 1, 1, -1}, {3, 2, 1, 1}, DType::F64);
  Tensor b = Tensor::from_vector({0, 0, 0.5}, {3}, DType::F64);
  Tensor y = engine::conv2d(x, w, b);
  REQUIRE(y.shape() == engine::Shape{1, 3, 2, 2});
  test::require_close(y, {1, 2, 3, 4, 10, 20, 30, 40, -8.5, -17.5, -26.5, -35.5}, 0, 0);
}

TEST_CASE("conv2d forward: a non-contiguous input gives the same result", "[conv2d]") {
  Tensor x = test::random_leaf({2, 3, 5, 6}, 21).detach();
  Tensor w = test::random_leaf({4, 3, 3, 3}, 22).detach();
  Tensor xt = x.transpose(2, 3);  // [2, 3, 6, 5], strided
  REQUIRE_FALSE(xt.is_contiguous());
  Conv2dOptions o = make_options(2, 1, 1, 0, 1, 1);
  test::require_close(engine::conv2d(xt, w, Tensor(), o),
                      engine::conv2d(xt.contiguous(), w, Tensor(), o), 0, 0);
}

// ---- op level: gradients -----------------------------------------------------------------------

TEST_CASE("conv2d grad: stride 1, no padding, C=2, K=3", "[conv2d][grad]") {
  require_conv2d_gradcheck({2, 2, 4, 5}, {3, 2, 3, 3}, true, make_options(1, 1, 0, 0, 1, 1));
}

TEST_CASE("conv2d grad: stride 2, padding 1", "[conv2d][grad]") {
  require_conv2d_gradcheck({2, 2, 5, 5}, {3, 2, 3, 3}, true, make_options(2, 2, 1, 1, 1, 1));
}

TEST_CASE("conv2d grad: dilation 2", "[conv2d][grad]") {
  require_conv2d_gradcheck({1, 2, 6, 5}, {3, 2, 2, 2}, true, make_options(1, 1, 0, 0, 2, 2));
}

TEST_CASE("conv2d grad: stride 2, padding 1, dilation 2", "[conv2d][grad]") {
  require_conv2d_gradcheck({2, 2, 6, 7}, {3, 2, 3, 3}, true, make_options(2, 2, 1, 1, 2, 2));
}

TEST_CASE("conv2d grad: non-square kernel with per-axis stride, padding, dilation",
          "[conv2d][grad]") {
  require_conv2d_gradcheck({2, 2, 5, 6}, {3, 2, 3, 2}, true, make_options(2, 1, 1, 0, 1, 2));
}

TEST_CASE("conv2d grad: no bias, 1x1 kernel", "[conv2d][grad]") {
  require_conv2d_gradcheck({2, 3, 3, 4}, {2, 3, 1, 1}, false, make_options(1, 1, 0, 0, 1, 1));
  require_conv2d_gradcheck({2, 3, 5, 4}, {2, 3, 1, 1}, false, make_options(2, 2, 0, 0, 1, 1));
}

TEST_CASE("conv2d grad: only the requested gradients are computed", "[conv2d][grad]") {
  Tensor x = test::random_leaf({2, 2, 5, 5}, 31);
  Tensor w = test::random_leaf({3, 2, 3, 3}, 32);
  Tensor b = test::random_leaf({3}, 33);
  auto traced = [&](const Tensor& input) {
    Tensor y = engine::conv2d(x, w, b, make_options(1, 1, 1, 1, 1, 1));
    engine::GradTrace trace;
    std::vector<Tensor> g = engine::grad({y}, {input}, {Tensor::ones(y.shape(), DType::F64)});
    REQUIRE(g.size() == 1);
    REQUIRE(g[0].shape() == input.shape());
    return trace.computed();
  };
  // grad w.r.t. x alone: dgrad only, no wgrad, no db (what attacks rely on).
  REQUIRE(traced(x) == std::vector<std::string>{"conv2d:0"});
  REQUIRE(traced(w) == std::vector<std::string>{"conv2d:1"});
  REQUIRE(traced(b) == std::vector<std::string>{"conv2d:2"});
}

TEST_CASE("conv2d grad: bias gradient is the sum of dy over N, P, Q", "[conv2d][grad]") {
  // dy = ones on a [2, 3, 2, 2] output: db[k] = 2 * 2 * 2 = 8 for every k.
  Tensor x = test::random_leaf({2, 2, 3, 3}, 41);
  Tensor w = test::random_leaf({3, 2, 2, 2}, 42);
  Tensor b = test::random_leaf({3}, 43);
  Tensor y = engine::conv2d(x, w, b);
  REQUIRE(y.shape() == engine::Shape{2, 3, 2, 2});
  std::vector<Tensor> g = engine::grad({y}, {b}, {Tensor::ones(y.shape(), DType::F64)});
  test::require_close(g[0], {8, 8, 8}, 1e-12, 0);
}

// ---- op level: errors --------------------------------------------------------------------------

TEST_CASE("conv2d errors: bad shapes and options name the op and the shapes", "[conv2d]") {
  using Catch::Contains;
  Tensor x = Tensor::zeros({1, 3, 5, 5}, DType::F64);
  Tensor w = Tensor::zeros({2, 3, 3, 3}, DType::F64);

  // Channel mismatch.
  REQUIRE_THROWS_WITH(engine::conv2d(x, Tensor::zeros({2, 2, 3, 3}, DType::F64), Tensor()),
                      Contains("conv2d") && Contains("[1, 3, 5, 5]") && Contains("[2, 2, 3, 3]") &&
                          Contains("channels"));
  // Kernel larger than the padded input: 7x7 vs 5 + 2*0, and a 3x3 dilated to 5x5 vs 4x4.
  REQUIRE_THROWS_WITH(
      engine::conv2d(x, Tensor::zeros({2, 3, 7, 7}, DType::F64), Tensor()),
      Contains("conv2d") && Contains("larger than the padded input") && Contains("[2, 3, 7, 7]"));
  REQUIRE_THROWS_WITH(engine::conv2d(Tensor::zeros({1, 3, 4, 4}, DType::F64), w, Tensor(),
                                     make_options(1, 1, 0, 0, 2, 2)),
                      Contains("conv2d") && Contains("larger than the padded input"));
  // Not 4-D.
  REQUIRE_THROWS_WITH(engine::conv2d(Tensor::zeros({3, 5, 5}, DType::F64), w, Tensor()),
                      Contains("conv2d") && Contains("4-D") && Contains("[3, 5, 5]"));
  REQUIRE_THROWS_WITH(engine::conv2d(x, Tensor::zeros({2, 3, 3}, DType::F64), Tensor()),
                      Contains("conv2d") && Contains("weight") && Contains("[2, 3, 3]"));
  // Bias of the wrong size, dtype mismatch, bad options.
  REQUIRE_THROWS_WITH(engine::conv2d(x, w, Tensor::zeros({3}, DType::F64)),
                      Contains("conv2d") && Contains("bias") && Contains("[3]"));
  REQUIRE_THROWS_WITH(engine::conv2d(x, Tensor::zeros({2, 3, 3, 3}, DType::F32), Tensor()),
                      Contains("conv2d") && Contains("weight"));
  REQUIRE_THROWS_WITH(engine::conv2d(x, w, Tensor(), make_options(0, 1, 0, 0, 1, 1)),
                      Contains("conv2d") && Contains("stride"));
  REQUIRE_THROWS_WITH(engine::conv2d(x, w, Tensor(), make_options(1, 1, -1, 0, 1, 1)),
                      Contains("conv2d") && Contains("padding"));
  REQUIRE_THROWS_WITH(engine::conv2d(x, w, Tensor(), make_options(1, 1, 0, 0, 0, 1)),
                      Contains("conv2d") && Contains("dilation"));
}
