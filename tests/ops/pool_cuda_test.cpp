// Pooling on CUDA against the CPU reference: max / avg pooling forward and backward (through
// autograd) over kernel 1-3, stride 1-3, every legal padding and odd sizes, ResNet's stem
// max-pool, ties and NaN in max windows (first-max routing), and the global average pool.
//
// The CUDA kernels evaluate the same expressions in the same order as the f32 reference (the
// backwards are gathers that add window contributions in the reference's (p, q) order), so the
// elementwise tolerance is ample; max-pool forward is a pure selection and must match exactly.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <sstream>
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
using engine::Pool2dOptions;
using engine::Shape;
using engine::Tensor;

namespace {

Pool2dOptions pool_options(int64_t kernel, int64_t stride, int64_t pad) {
  Pool2dOptions o;
  o.kernel_h = o.kernel_w = kernel;
  o.stride_h = o.stride_w = stride;
  o.pad_h = o.pad_w = pad;
  return o;
}

std::string describe(const Shape& shape, const Pool2dOptions& o) {
  std::ostringstream out;
  out << "x " << engine::shape_str(shape) << " kernel " << o.kernel_h << "x" << o.kernel_w
      << " stride " << o.stride_h << "x" << o.stride_w << " pad " << o.pad_h << "x" << o.pad_w;
  return out.str();
}

using PoolFn = Tensor (*)(const Tensor&, const Pool2dOptions&);
using test::random_f32;

// Forward and dx for a fixed dy on CUDA vs the f32 CPU op on the same values.
void require_pool_matches_cpu(PoolFn pool, const Tensor& x, const Pool2dOptions& o,
                              const std::string& what, bool exact_forward) {
  INFO(what << ": " << describe(x.shape(), o));
  Tensor x_cpu = x.detach();
  x_cpu.set_requires_grad(true);
  Tensor x_cuda = x.to(Device::cuda()).detach();
  x_cuda.set_requires_grad(true);
  const Tensor y_cpu = pool(x_cpu, o);
  const Tensor y_cuda = pool(x_cuda, o);
  REQUIRE(y_cuda.device().is_cuda());
  const test::Tolerance tol = test::elementwise_tolerance();
  if (exact_forward) {
    test::require_close(y_cuda, y_cpu, 0.0, 0.0, what + " forward");
  } else {
    test::require_close(y_cuda, y_cpu, tol.atol, tol.rtol, what + " forward");
  }
  const Tensor dy = random_f32(y_cpu.shape(), 77);
  const Tensor dx_cpu = engine::grad({y_cpu}, {x_cpu}, {dy})[0];
  const Tensor dx_cuda = engine::grad({y_cuda}, {x_cuda}, {dy.to(Device::cuda())})[0];
  REQUIRE(dx_cuda.device().is_cuda());
  test::require_close(dx_cuda, dx_cpu, tol.atol, tol.rtol, what + " backward");
}

}  // namespace

TEST_CASE("pool cuda: max and avg over kernel, stride and padding", "[pool][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 1;
  for (int64_t kernel : {1, 2, 3}) {
    for (int64_t stride : {1, 2, 3}) {
      for (int64_t pad = 0; pad <= kernel / 2; ++pad) {
        const Tensor x = random_f32({2, 3, 7, 9}, seed++);
        const Pool2dOptions o = pool_options(kernel, stride, pad);
        require_pool_matches_cpu(engine::max_pool2d, x, o, "max_pool2d", true);
        require_pool_matches_cpu(engine::avg_pool2d, x, o, "avg_pool2d", false);
      }
    }
  }
}

TEST_CASE("pool cuda: rectangular windows and ResNet's stem pool", "[pool][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  Pool2dOptions rect;
  rect.kernel_h = 3;
  rect.kernel_w = 2;
  rect.stride_h = 2;
  rect.stride_w = 1;
  rect.pad_h = 1;
  rect.pad_w = 1;
  const Tensor x = random_f32({1, 2, 8, 5}, 50);
  require_pool_matches_cpu(engine::max_pool2d, x, rect, "max_pool2d", true);
  require_pool_matches_cpu(engine::avg_pool2d, x, rect, "avg_pool2d", false);
  // ResNet: max_pool2d(kernel 3, stride 2, pad 1) on [2, 64, 112, 112].
  const Tensor stem = random_f32({2, 64, 112, 112}, 51);
  require_pool_matches_cpu(engine::max_pool2d, stem, pool_options(3, 2, 1), "max_pool2d", true);
  // C2F2: max_pool2d(2) on [2, 32, 28, 28].
  const Tensor c2f2 = random_f32({2, 32, 28, 28}, 52);
  require_pool_matches_cpu(engine::max_pool2d, c2f2, pool_options(2, 2, 0), "max_pool2d", true);
}

TEST_CASE("pool cuda: max routes ties to the first cell and propagates NaN", "[pool][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // A plane of 0.5/-0.5 values in a checkerboard of 2x2 blocks: every 3x3 window with stride 1
  // holds several equal maxima, so only first-max routing (row-major window order) matches.
  std::vector<double> values(6 * 6);
  for (int h = 0; h < 6; ++h) {
    for (int w = 0; w < 6; ++w) values[h * 6 + w] = ((h / 2 + w / 2) % 2 == 0) ? 0.5 : -0.5;
  }
  const Tensor ties = Tensor::from_vector(values, {1, 1, 6, 6});
  require_pool_matches_cpu(engine::max_pool2d, ties, pool_options(3, 1, 1), "max ties", true);

  values[2 * 6 + 3] = std::numeric_limits<double>::quiet_NaN();
  const Tensor with_nan = Tensor::from_vector(values, {1, 1, 6, 6});
  Tensor y = engine::max_pool2d(with_nan.to(Device::cuda()), pool_options(2, 2, 0));
  const std::vector<double> out = y.to_vector();
  // Window (1, 1) covers rows 2-3, columns 2-3 and holds the NaN; window (0, 0) does not.
  REQUIRE(std::isnan(out[1 * 3 + 1]));
  REQUIRE(out[0] == 0.5);
  // The NaN also takes its window's gradient, as on the CPU (pool_test.cpp pins the CPU's
  // routing): dx equals the CPU's exactly and holds window (1, 1)'s dy at the NaN's cell.
  Tensor x_cpu = with_nan.detach(), x_cuda = with_nan.to(Device::cuda()).detach();
  x_cpu.set_requires_grad(true);
  x_cuda.set_requires_grad(true);
  const Tensor dy = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  const Tensor dx_cpu =
      engine::grad({engine::max_pool2d(x_cpu, pool_options(2, 2, 0))}, {x_cpu}, {dy})[0];
  const Tensor dx_cuda = engine::grad({engine::max_pool2d(x_cuda, pool_options(2, 2, 0))}, {x_cuda},
                                      {dy.to(Device::cuda())})[0];
  test::require_close(dx_cuda, dx_cpu, 0.0, 0.0, "max-pool dx with a NaN");
  const std::vector<double> dx = dx_cuda.to(Device::cpu()).to_vector();
  CHECK(dx[2 * 6 + 3] == 5.0);
  CHECK(dx[2 * 6 + 2] == 0.0);
  CHECK(dx[3 * 6 + 2] == 0.0);
  CHECK(dx[3 * 6 + 3] == 0.0);
}

TEST_CASE("pool cuda: adaptive average pool to 1x1", "[pool][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 60;
  for (const Shape& shape : std::vector<Shape>{
           {1, 1, 1, 1}, {2, 3, 7, 7}, {3, 5, 1, 9}, {2, 512, 7, 7}, {1, 2, 33, 31}}) {
    INFO("x " << engine::shape_str(shape));
    Tensor x_cpu = random_f32(shape, seed++);
    x_cpu.set_requires_grad(true);
    Tensor x_cuda = x_cpu.detach().to(Device::cuda());
    x_cuda.set_requires_grad(true);
    const Tensor y_cpu = engine::adaptive_avg_pool2d(x_cpu);
    const Tensor y_cuda = engine::adaptive_avg_pool2d(x_cuda);
    const test::Tolerance tol = test::reduction_tolerance(shape[2] * shape[3]);
    test::require_close(y_cuda, y_cpu, tol.atol, tol.rtol, "adaptive_avg_pool2d forward");
    const Tensor dy = random_f32(y_cpu.shape(), 99);
    const Tensor dx_cpu = engine::grad({y_cpu}, {x_cpu}, {dy})[0];
    const Tensor dx_cuda = engine::grad({y_cuda}, {x_cuda}, {dy.to(Device::cuda())})[0];
    const test::Tolerance el = test::elementwise_tolerance();
    test::require_close(dx_cuda, dx_cpu, el.atol, el.rtol, "adaptive_avg_pool2d backward");
  }
}
