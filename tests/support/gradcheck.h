// Finite-difference gradient check (caffe's checker, micrograd's spirit).
//
// For f: inputs -> tensor, define the scalar L = sum(f(inputs) * W) with a fixed random weight
// W (so every output element matters with a distinct weight). The analytic gradient comes from
// engine::grad(L, inputs); the numeric one from central differences
//   dL/dx_i ~ (L(x_i + h) - L(x_i - h)) / 2h,  h = 1e-6, in f64.
// Error per element: |analytic - numeric| / max(1, |analytic|, |numeric|). Truncation error is
// O(h^2 |f'''|) ~ 1e-12 and rounding O(eps/h) ~ 1e-10, so 1e-6 is a strict bound away from kinks.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace test {

struct GradCheckResult {
  double max_error = 0.0;
  std::string worst;  // "input 1, element 7: analytic 0.25, numeric 0.2500001"
  int64_t checked_elements = 0;
  double largest_analytic = 0.0;  // max |analytic| over every checked element
};

using GradFunction = std::function<engine::Tensor(const std::vector<engine::Tensor>&)>;

// `inputs` must be f64 CPU leaves; only those with requires_grad() are checked.
inline GradCheckResult gradcheck(const GradFunction& f, const std::vector<engine::Tensor>& inputs,
                                 double h = 1e-6, uint64_t weight_seed = 1234) {
  using engine::Tensor;
  Tensor probe;
  {
    engine::NoGradGuard no_grad;
    probe = f(inputs);
  }
  engine::Generator gen(weight_seed);
  Tensor weights = engine::uniform(probe.shape(), 0.5, 1.5, gen, engine::DType::F64);
  auto scalar_loss = [&](const std::vector<Tensor>& xs) {
    return engine::sum(engine::mul(f(xs), weights));
  };

  std::vector<Tensor> checked;
  std::vector<size_t> checked_index;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      checked.push_back(inputs[i]);
      checked_index.push_back(i);
    }
  }
  REQUIRE_FALSE(checked.empty());  // no input requires grad: nothing would be checked
  std::vector<Tensor> analytic = engine::grad({scalar_loss(inputs)}, checked);

  GradCheckResult result;
  engine::NoGradGuard no_grad;
  for (size_t c = 0; c < checked.size(); ++c) {
    Tensor x = checked[c];
    REQUIRE(x.dtype() == engine::DType::F64);
    REQUIRE(x.is_contiguous());
    std::vector<double> a = analytic[c].to_vector();
    double* data = x.data<double>();
    for (int64_t e = 0; e < x.numel(); ++e) {
      double saved = data[e];
      data[e] = saved + h;
      double plus = scalar_loss(inputs).item();
      data[e] = saved - h;
      double minus = scalar_loss(inputs).item();
      data[e] = saved;
      double numeric = (plus - minus) / (2.0 * h);
      ++result.checked_elements;
      result.largest_analytic = std::max(result.largest_analytic, std::fabs(a[e]));
      double scale = std::max({1.0, std::fabs(a[e]), std::fabs(numeric)});
      double error = std::fabs(a[e] - numeric) / scale;
      if (!(error <= result.max_error)) {  // also catches NaN
        result.max_error = std::isnan(error) ? INFINITY : error;
        std::ostringstream where;
        where << "input " << checked_index[c] << ", element " << e << ": analytic " << a[e]
              << ", numeric " << numeric;
        result.worst = where.str();
      }
    }
  }
  return result;
}

// REQUIRE-style wrapper with a readable failure message. It also requires some analytic
// gradient entry to be non-zero: a check where every entry is 0 on both sides (a hinge that is
// inactive everywhere, a path that drops the input) would pass whatever the backward computes.
inline void require_gradcheck(const GradFunction& f, const std::vector<engine::Tensor>& inputs,
                              double tolerance = 1e-6) {
  GradCheckResult result = gradcheck(f, inputs);
  INFO("worst: " << result.worst);
  REQUIRE(result.checked_elements > 0);
  REQUIRE(result.largest_analytic > 0.0);
  REQUIRE(result.max_error <= tolerance);
}

// An f64 CPU leaf with uniform values in [low, high), requiring grad.
inline engine::Tensor random_leaf(const engine::Shape& shape, uint64_t seed, double low = -1.0,
                                  double high = 1.0) {
  engine::Generator gen(seed);
  engine::Tensor t = engine::uniform(shape, low, high, gen, engine::DType::F64);
  t.set_requires_grad(true);
  return t;
}

}  // namespace test
