// Helpers shared by the fused ops' tests (conv2d_pool_relu_*test.cpp, linear_fused_*test.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/ops.h"
#include "engine/tensor.h"
#include "tests/support/allclose.h"
#include "tests/support/tensors.h"
#include "tests/support/tolerance.h"

namespace fused_test {

inline engine::Conv2dOptions conv_options(int64_t stride, int64_t pad, int64_t dilation = 1) {
  engine::Conv2dOptions o;
  o.stride_h = o.stride_w = stride;
  o.pad_h = o.pad_w = pad;
  o.dilation_h = o.dilation_w = dilation;
  return o;
}

// A copy of `t` as a leaf on `device` in `dtype` that requires grad.
inline engine::Tensor leaf(const engine::Tensor& t, engine::Device device, engine::DType dtype) {
  engine::Tensor copy = t.to(dtype).to(device).detach();
  copy.set_requires_grad(true);
  return copy;
}

// The defined tensors among `values` as three sets of leaves: f32 on CUDA for the fused op, f32
// on CUDA for the unfused ops, f64 on the CPU for the reference.
struct LeafSets {
  std::vector<engine::Tensor> fused, plain, ref;
};

inline LeafSets leaf_sets(const std::vector<engine::Tensor>& values) {
  LeafSets sets;
  for (const engine::Tensor& t : values) {
    if (!t.defined()) continue;
    sets.fused.push_back(leaf(t, engine::Device::cuda(), engine::DType::F32));
    sets.plain.push_back(leaf(t, engine::Device::cuda(), engine::DType::F32));
    sets.ref.push_back(leaf(t, engine::Device::cpu(), engine::DType::F64));
  }
  return sets;
}

// Equal values and equal signs of zero (-0 and +0 differ in bits); NaN matches NaN.
inline void require_same_bits(const engine::Tensor& actual, const engine::Tensor& expected,
                              const std::string& what) {
  INFO(what);
  REQUIRE(actual.shape() == expected.shape());
  const std::vector<double> a = actual.to_vector(), e = expected.to_vector();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i << ": " << a[i] << " vs " << e[i]);
    REQUIRE(((std::isnan(a[i]) && std::isnan(e[i])) ||
             (a[i] == e[i] && std::signbit(a[i]) == std::signbit(e[i]))));
  }
}

// Within reduction_tolerance(length) at the scale of the reference (tests/support/tolerance.h).
inline void require_reduction_close(const engine::Tensor& actual, const engine::Tensor& expected,
                                    int64_t length, const std::string& what) {
  const std::vector<double> ref = expected.to_vector();
  const test::Tolerance tol = test::reduction_tolerance(length, std::max(test::rms(ref), 1e-3));
  test::require_close(actual.to_vector(), ref, tol.atol, tol.rtol, what);
}

}  // namespace fused_test
