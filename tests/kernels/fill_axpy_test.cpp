// fill and axpy: the first real CUDA kernels, checked against their CPU twins.
#include <catch2/catch.hpp>

#include <vector>

#include "engine/tensor.h"
#include "kernels/axpy/axpy.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/fill/fill.h"
#include "tests/support/cuda_guard.h"

using namespace engine;

TEST_CASE("fill: cpu writes the value everywhere and nothing past n", "[fill]") {
  std::vector<double> buffer(7, -1.0);
  kernels::fill_cpu(5, 2.5, buffer.data());
  REQUIRE(buffer == std::vector<double>{2.5, 2.5, 2.5, 2.5, 2.5, -1.0, -1.0});
}

TEST_CASE("axpy: cpu hand-computed", "[axpy]") {
  std::vector<float> x{1, 2, 3}, y{10, 20, 30};
  kernels::axpy_cpu<float>(3, 0.5f, x.data(), y.data());
  REQUIRE(y == std::vector<float>{10.5f, 21.0f, 31.5f});
}

TEST_CASE("fill cuda: matches cpu over odd sizes", "[fill][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // 64 elements past n hold a sentinel that must survive (a grid rounded up past n would not).
  for (int64_t n : {1, 7, 255, 256, 257, 100003}) {
    Tensor t = Tensor::full({n + 64}, -1.0, DType::F32, Device::cuda());
    kernels::fill_cuda(n, 3.25f, t.data<float>());
    std::vector<double> host = t.to_vector();
    for (int64_t i = 0; i < n + 64; ++i) {
      INFO("n " << n << ", element " << i);
      REQUIRE(host[i] == (i < n ? 3.25 : -1.0));
    }
  }
}

TEST_CASE("axpy cuda: matches cpu over odd sizes", "[axpy][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  for (int64_t n : {1, 31, 1000, 65537}) {
    std::vector<double> xs(n), ys(n);
    for (int64_t i = 0; i < n; ++i) {
      xs[i] = 0.25 * double(i % 17) - 1.0;
      ys[i] = 0.5 * double(i % 5);
    }
    Tensor x = Tensor::from_vector(xs, {n}), y = Tensor::from_vector(ys, {n});
    Tensor xd = x.to(Device::cuda()), yd = y.to(Device::cuda());
    kernels::axpy_cpu<float>(n, -1.5f, x.data<float>(), y.data<float>());
    kernels::axpy_cuda(n, -1.5f, xd.data<float>(), yd.data<float>());
    REQUIRE(yd.to_vector() == y.to_vector());  // one fused multiply-add either way: exact
  }
}

TEST_CASE("cuda runtime: device discovery never throws", "[device]") {
  int count = kernels::cuda_device_count();
  REQUIRE(count >= 0);
  REQUIRE(kernels::cuda_device_count() == count);  // a second query after a failure is still fine
}
