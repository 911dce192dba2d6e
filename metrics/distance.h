// Distances for evaluation: the one place where the metric (N, E, C) turns into numbers.
//
// The metrics layer works on `Points`: a row-major f32 copy of the embeddings prepared for one
// metric, with squared norms cached, so every tile of distances is one GEMM:
//
//   metric N (the papers' default): rows L2-normalized, then Euclidean distance
//   metric E: Euclidean distance on the raw rows
//   metric C: cosine distance 1 - cos(a, b); rows L2-normalized so cos(a, b) = a.b
//
// Ranking never needs the distance itself, only an order-preserving "key" (sqrt is monotone):
//
//   key(a, b) = max(|a|^2 + |b|^2 - 2 a.b, 0)    for N and E (squared Euclidean, clamped: the
//                                               expansion can go slightly negative in f32)
//   key(a, b) = 1 - a.b                          for C
//   distance  = sqrt(key) for N and E, key for C (key_to_distance)
//
// Cost of one m x nb tile (key_tile): the GEMM, 2 m nb d FLOPs, reading (m + nb) d floats, writing
// m nb floats; the norm correction is O(m nb). Tiles are computed with Eigen's GEMM,
// single-threaded and with fixed blocking (kernels/common/cpu_gemm.h); callers run tiles of FIXED
// shape inside their own OpenMP loops, so every key is computed by the same sequence of operations
// whatever the thread count (determinism).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "kernels/common/metric.h"

namespace metrics {

// The metric and its names are the kernels' (kernels/common/metric.h).
using engine::kernels::Metric;
using engine::kernels::metric_name;
using engine::kernels::parse_metric;

struct Points {
  Metric metric = Metric::N;
  int64_t n = 0;                // rows
  int64_t d = 0;                // embedding dimension
  std::vector<float> x;         // n * d, row-major; L2-normalized rows for N and C
  std::vector<float> sq_norms;  // n: |x_i|^2 of the stored rows

  const float* row(int64_t i) const { return x.data() + i * d; }
};

// A prepared copy of n x d row-major values. Rows of zero norm stay zero when normalized (their
// cosine with anything is taken as 0). NaN or Inf anywhere throws engine::Error naming the row.
Points make_points(const float* values, int64_t n, int64_t d, Metric metric);
// The same from a 2-D f32 or f64 tensor on any device (copied to the host). `what` names the
// source in errors (e.g. the file name).
Points make_points(const engine::Tensor& embeddings, Metric metric, const std::string& what);
// Rows `indices[0..count)` of `points`, already prepared (no second normalization).
Points gather_points(const Points& points, const int64_t* indices, int64_t count);
// Means of groups of rows: row g of the result is the mean of rows members[g] of `points` (f64
// accumulation in index order), as raw vectors for `metric` (so Metric::C normalizes the means,
// Metric::E keeps them as they are).
Points group_means(const Points& points, const std::vector<std::vector<int64_t>>& members,
                   Metric metric);

// keys[i * ld + j] = key(a.row(a0 + i), b.row(b0 + j)) for i < m, j < nb (a and b share the metric
// and dimension). Single-threaded when called inside an OpenMP parallel region.
void key_tile(const Points& a, int64_t a0, int64_t m, const Points& b, int64_t b0, int64_t nb,
              float* keys, int64_t ld);

float key_to_distance(Metric metric, float key);

}  // namespace metrics
