// Prepared points and tiles of ranking keys (math, layout and cost in distance.h).
#include "metrics/distance.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/common/check.h"
#include "kernels/common/cpu_gemm.h"

namespace metrics {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

bool normalizes(Metric metric) { return metric != Metric::E; }

// Normalizes row i in place (when the metric asks for it) and caches its squared norm. The norm is
// accumulated in f64 so a 512-dimensional row is normalized to ~1 ulp.
void finish_row(Points& p, int64_t i) {
  float* r = p.x.data() + i * p.d;
  double sq = 0.0;
  for (int64_t k = 0; k < p.d; ++k) sq += static_cast<double>(r[k]) * r[k];
  if (normalizes(p.metric) && sq > 0.0) {
    const double inv = 1.0 / std::sqrt(sq);
    sq = 0.0;
    for (int64_t k = 0; k < p.d; ++k) {
      r[k] = static_cast<float>(r[k] * inv);
      sq += static_cast<double>(r[k]) * r[k];
    }
  }
  p.sq_norms[i] = static_cast<float>(sq);
}

Points empty_points(Metric metric, int64_t n, int64_t d) {
  Points p;
  p.metric = metric;
  p.n = n;
  p.d = d;
  p.x.resize(static_cast<size_t>(n * d));
  p.sq_norms.resize(static_cast<size_t>(n));
  return p;
}

}  // namespace

Points make_points(const float* values, int64_t n, int64_t d, Metric metric) {
  ENGINE_CHECK(n >= 0 && d >= 1, "metrics: embeddings must be [N, D] with D >= 1, got [", n, ", ",
               d, "]");
  Points p = empty_points(metric, n, d);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < d; ++k) {
      const float v = values[i * d + k];
      ENGINE_CHECK(std::isfinite(v), "metrics: embedding row ", i, " column ", k,
                   " is not finite (", v, ")");
    }
  }
  std::copy(values, values + n * d, p.x.begin());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) finish_row(p, i);
  // A key |a|^2 + |b|^2 - 2 a.b is finite when every squared norm is at most FLT_MAX / 4 (then
  // |a.b| <= |a| |b| is too); past that (metric E, rows of norm above ~9.2e18) it could be
  // inf - inf = NaN, and a NaN key breaks the sort's ordering.
  constexpr double kLargestSquaredNorm = std::numeric_limits<float>::max() / 4.0;
  for (int64_t i = 0; i < n; ++i) {
    ENGINE_CHECK(static_cast<double>(p.sq_norms[i]) <= kLargestSquaredNorm,
                 "metrics: embedding row ", i, " has norm ",
                 std::sqrt(static_cast<double>(p.sq_norms[i])),
                 ", too large for f32 distances (at most ", std::sqrt(kLargestSquaredNorm), ")");
  }
  return p;
}

Points make_points(const engine::Tensor& embeddings, Metric metric, const std::string& what) {
  ENGINE_CHECK(embeddings.defined(), what, ": undefined embeddings tensor");
  ENGINE_CHECK(embeddings.dim() == 2, what, ": embeddings must be 2-D [N, D], got shape ",
               engine::shape_str(embeddings.shape()));
  ENGINE_CHECK(engine::is_floating(embeddings.dtype()), what,
               ": embeddings must be f32 or f64, got ", engine::dtype_name(embeddings.dtype()));
  engine::Tensor host = embeddings.to(engine::Device::cpu()).to(engine::DType::F32).contiguous();
  try {
    return make_points(host.data<float>(), host.size(0), host.size(1), metric);
  } catch (const engine::Error& e) {
    engine::fail(what, ": ", e.what());
  }
}

Points gather_points(const Points& points, const int64_t* indices, int64_t count) {
  Points p = empty_points(points.metric, count, points.d);
  for (int64_t g = 0; g < count; ++g) {
    const int64_t i = indices[g];
    std::copy(points.row(i), points.row(i) + points.d, p.x.begin() + g * points.d);
    p.sq_norms[g] = points.sq_norms[i];
  }
  return p;
}

Points group_means(const Points& points, const std::vector<std::vector<int64_t>>& members,
                   Metric metric) {
  const int64_t groups = static_cast<int64_t>(members.size());
  Points p = empty_points(metric, groups, points.d);
  std::vector<double> sum(static_cast<size_t>(points.d));
  for (int64_t g = 0; g < groups; ++g) {
    const std::vector<int64_t>& rows = members[g];
    ENGINE_CHECK(!rows.empty(), "metrics: group ", g, " has no members");
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t i : rows) {
      const float* r = points.row(i);
      for (int64_t k = 0; k < points.d; ++k) sum[k] += r[k];
    }
    const double inv = 1.0 / static_cast<double>(rows.size());
    for (int64_t k = 0; k < points.d; ++k) {
      p.x[g * points.d + k] = static_cast<float>(sum[k] * inv);
    }
    finish_row(p, g);
  }
  return p;
}

void key_tile(const Points& a, int64_t a0, int64_t m, const Points& b, int64_t b0, int64_t nb,
              float* keys, int64_t ld) {
  ENGINE_CHECK(a.d == b.d && a.metric == b.metric, "key_tile: points of dimension ", a.d, " and ",
               b.d, " (metrics ", metric_name(a.metric), ", ", metric_name(b.metric), ")");
  if (m == 0 || nb == 0) return;
  engine::kernels::use_fixed_gemm_blocking();  // keys independent of the CPU model (cpu_gemm.h)
  Eigen::Map<const RowMatrix> lhs(a.row(a0), m, a.d);
  Eigen::Map<const RowMatrix> rhs(b.row(b0), nb, b.d);
  Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>> out(keys, m, nb, Eigen::OuterStride<>(ld));
  out.noalias() = lhs * rhs.transpose();
  if (a.metric == Metric::C) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < nb; ++j) keys[i * ld + j] = 1.0f - keys[i * ld + j];
    }
    return;
  }
  for (int64_t i = 0; i < m; ++i) {
    const float ai = a.sq_norms[a0 + i];
    const float* bj = b.sq_norms.data() + b0;
    float* k = keys + i * ld;
    for (int64_t j = 0; j < nb; ++j) k[j] = std::max(ai + bj[j] - 2.0f * k[j], 0.0f);
  }
}

float key_to_distance(Metric metric, float key) {
  return metric == Metric::C ? key : std::sqrt(key);
}

}  // namespace metrics
