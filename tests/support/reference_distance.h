// The distance of two rows straight from the metric's definition (kernels/common/metric.h), in
// f64 plain loops written independently of the library: the reference of the losses' and the
// metrics' tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/common/metric.h"

namespace test {

// Distance between rows a and b of an n x d row-major array, straight from the definitions.
inline double reference_distance(const std::vector<double>& x, int64_t d, int64_t a, int64_t b,
                                 engine::kernels::Metric metric) {
  double aa = 0, bb = 0, ab = 0, sq = 0;
  for (int64_t k = 0; k < d; ++k) {
    const double u = x[a * d + k], v = x[b * d + k];
    aa += u * u;
    bb += v * v;
    ab += u * v;
  }
  if (metric == engine::kernels::Metric::C) return 1.0 - ab / (std::sqrt(aa) * std::sqrt(bb));
  const double na = metric == engine::kernels::Metric::N ? std::sqrt(aa) : 1.0;
  const double nb = metric == engine::kernels::Metric::N ? std::sqrt(bb) : 1.0;
  for (int64_t k = 0; k < d; ++k) {
    const double diff = x[a * d + k] / na - x[b * d + k] / nb;
    sq += diff * diff;
  }
  return std::sqrt(sq);
}

}  // namespace test
