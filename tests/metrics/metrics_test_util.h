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
#include "tests/support/reference_distance.h"

namespace test {

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

// Two retrieval results agree: every score within `tol`, the same query counts.
inline void require_same_retrieval(const metrics::RetrievalResult& a,
                                   const metrics::RetrievalResult& b, double tol) {
  REQUIRE(a.recall.size() == b.recall.size());
  for (size_t i = 0; i < a.recall.size(); ++i) {
    CHECK(a.recall[i] == Approx(b.recall[i]).margin(tol));
  }
  CHECK(a.map == Approx(b.map).margin(tol));
  CHECK(a.map_at_r == Approx(b.map_at_r).margin(tol));
  CHECK(a.map_at_r10 == Approx(b.map_at_r10).margin(tol));
  CHECK(a.r_precision == Approx(b.r_precision).margin(tol));
  CHECK(a.mrr == Approx(b.mrr).margin(tol));
  CHECK(a.precision_at_1 == Approx(b.precision_at_1).margin(tol));
  check_same_class_averages(a.per_class, b.per_class, tol);
  CHECK(a.queries == b.queries);
  CHECK(a.lone_queries == b.lone_queries);
}

}  // namespace test
