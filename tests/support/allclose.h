// Closeness checks that report where and by how much two tensors differ.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace test {

// Elementwise |actual - expected| <= atol + rtol * |expected|. On failure the message gives the
// first bad index, both values, and the max absolute error.
inline void require_close(const std::vector<double>& actual, const std::vector<double>& expected,
                          double atol, double rtol, const std::string& what = "") {
  REQUIRE(actual.size() == expected.size());
  double max_abs = 0.0;
  int64_t first_bad = -1;
  for (size_t i = 0; i < actual.size(); ++i) {
    double err = std::fabs(actual[i] - expected[i]);
    bool bad = !(err <= atol + rtol * std::fabs(expected[i]));  // NaN counts as bad
    if (bad && first_bad < 0) first_bad = static_cast<int64_t>(i);
    if (err > max_abs || std::isnan(err)) max_abs = err;
  }
  if (first_bad >= 0) {
    std::ostringstream message;
    message << what << ": first mismatch at flat index " << first_bad << ": got "
            << actual[first_bad] << ", expected " << expected[first_bad] << " (max abs error "
            << max_abs << ", atol " << atol << ", rtol " << rtol << ")";
    FAIL(message.str());
  }
  SUCCEED();
}

inline void require_close(const engine::Tensor& actual, const std::vector<double>& expected,
                          double atol, double rtol, const std::string& what = "") {
  require_close(actual.to_vector(), expected, atol, rtol, what);
}

inline void require_close(const engine::Tensor& actual, const engine::Tensor& expected, double atol,
                          double rtol, const std::string& what = "") {
  REQUIRE(actual.shape() == expected.shape());
  require_close(actual.to_vector(), expected.to_vector(), atol, rtol, what);
}

}  // namespace test
