// Helpers for the metrics tests: an untiled reference written independently of metrics/ (full
// distance rows in f64, std::sort by (distance, index)) and small data generators.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/random.h"
#include "metrics/distance.h"
#include "metrics/retrieval.h"

namespace test {

// Distance between rows a and b of an n x d row-major array, straight from the definitions.
inline double reference_distance(const std::vector<double>& x, int64_t d, int64_t a, int64_t b,
                                 metrics::Metric metric) {
  double aa = 0, bb = 0, ab = 0, sq = 0;
  for (int64_t k = 0; k < d; ++k) {
    const double u = x[a * d + k], v = x[b * d + k];
    aa += u * u;
    bb += v * v;
    ab += u * v;
  }
  if (metric == metrics::Metric::C) return 1.0 - ab / (std::sqrt(aa) * std::sqrt(bb));
  const double na = metric == metrics::Metric::N ? std::sqrt(aa) : 1.0;
  const double nb = metric == metrics::Metric::N ? std::sqrt(bb) : 1.0;
  for (int64_t k = 0; k < d; ++k) {
    const double diff = x[a * d + k] / na - x[b * d + k] / nb;
    sq += diff * diff;
  }
  return std::sqrt(sq);
}

// The ranking of query q: every j != q sorted by (distance, j).
inline std::vector<int64_t> reference_ranking(const std::vector<double>& x, int64_t n, int64_t d,
                                              int64_t q, metrics::Metric metric) {
  std::vector<std::pair<double, int64_t>> row;
  for (int64_t j = 0; j < n; ++j) {
    if (j != q) row.emplace_back(reference_distance(x, d, q, j, metric), j);
  }
  std::sort(row.begin(), row.end());
  std::vector<int64_t> order;
  for (const auto& e : row) order.push_back(e.second);
  return order;
}

// n x d values drawn uniformly from the integers {-range..range}: squared Euclidean distances are
// small exact integers in f32 and f64, so the tiled f32 code and the f64 reference must agree
// exactly, ties included.
inline std::vector<double> integer_points(int64_t n, int64_t d, int64_t range, uint64_t seed) {
  engine::Generator gen(seed);
  std::vector<int64_t> v = engine::randint({n * d}, -range, range + 1, gen).to_indices();
  return std::vector<double>(v.begin(), v.end());
}

inline std::vector<double> normal_points(int64_t n, int64_t d, uint64_t seed) {
  engine::Generator gen(seed);
  return engine::normal({n * d}, 0.0, 1.0, gen, engine::DType::F64).to_vector();
}

inline std::vector<int64_t> random_labels(int64_t n, int64_t classes, uint64_t seed) {
  engine::Generator gen(seed);
  return engine::randint({n}, 0, classes, gen).to_indices();
}

// The per-class averages (PML's avg_of_avgs) of two retrieval results agree to `tol`.
inline void check_same_class_averages(const metrics::ClassAverages& a,
                                      const metrics::ClassAverages& b, double tol) {
  CHECK(a.classes == b.classes);
  CHECK(a.precision_at_1 == Approx(b.precision_at_1).margin(tol));
  CHECK(a.map == Approx(b.map).margin(tol));
  CHECK(a.map_at_r == Approx(b.map_at_r).margin(tol));
  CHECK(a.r_precision == Approx(b.r_precision).margin(tol));
  CHECK(a.mrr == Approx(b.mrr).margin(tol));
}

inline metrics::Points points_from(const std::vector<double>& x, int64_t d,
                                   metrics::Metric metric) {
  std::vector<float> f(x.begin(), x.end());
  return metrics::make_points(f.data(), static_cast<int64_t>(x.size()) / d, d, metric);
}

}  // namespace test
