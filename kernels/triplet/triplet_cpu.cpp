// Fused SPC-2 triplet loss, CPU twin: the oracle of the CUDA kernels (math, layout and cost in
// triplet.h). Plain loops; the mining distances are computed by the engine's own l2_normalize and
// pairwise_distance CPU kernels (the fast path, which the pairwise_distance op runs on the CPU),
// so they are bit for bit the distances losses::mine_triplets mines on, and the mining is
// losses::mine_triplets' own (mine_triplets_cpu, triplet_mining.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/check.h"
#include "kernels/l2_normalize/l2_normalize.h"
#include "kernels/pairwise_distance/pairwise_distance.h"
#include "kernels/random/random.h"
#include "kernels/triplet/triplet.h"

namespace engine::kernels {
namespace {

constexpr double kNormEps = 1e-12;        // engine::l2_normalize's default eps
constexpr double kCosineEps = 1e-12;      // engine::pairwise_distance's cosine norm clamp
constexpr double kRowDistanceEps = 1e-6;  // PyTorch's pairwise_distance: |a - b + 1e-6|

double dot(const double* a, const double* b, int64_t D) {
  double sum = 0.0;
  for (int64_t k = 0; k < D; ++k) sum += a[k] * b[k];
  return sum;
}

// l2_normalize's backward for one row: g_in = (g - z <z, g> / |z|^2) / |z|, or g / eps where
// |z| < eps (the divisor was the constant eps). In place on g.
void normalize_backward(const double* z, double norm, int64_t D, double* g) {
  if (norm < kNormEps) {
    for (int64_t k = 0; k < D; ++k) g[k] /= kNormEps;
    return;
  }
  const double along = dot(z, g, D) / (norm * norm);
  for (int64_t k = 0; k < D; ++k) g[k] = (g[k] - z[k] * along) / norm;
}

}  // namespace

void check_fused_triplet_args(const char* name, int64_t B, int64_t D, double margin) {
  ENGINE_CHECK(B >= 2 && B % 2 == 0 && B <= kFusedTripletMaxBatch && D >= 1, name,
               ": expected an SPC-2 batch [B, D] with B even, 2 <= B <= ", kFusedTripletMaxBatch,
               " and D >= 1, got [", B, ", ", D, "]");
  ENGINE_CHECK(std::isfinite(margin), name, ": margin must be finite, got ", margin);
}

template <typename T>
void fused_triplet_cpu(const T* x, const int64_t* labels, int64_t B, int64_t D, Miner miner,
                       Metric metric, double margin, uint64_t seed, uint64_t offset, T* loss,
                       T* grad, int64_t* anchor, int64_t* positive, int64_t* negative,
                       T* hardness) {
  check_fused_triplet_args("fused_triplet_cpu", B, D, margin);
  for (int64_t i = 0; i < B; i += 2) {
    ENGINE_CHECK(labels[i] == labels[i + 1], "fused_triplet_cpu: SPC-2 batch [", B, ", ", D,
                 "] expects labels[", i, "] == labels[", i + 1, "], got ", labels[i], " and ",
                 labels[i + 1]);
  }
  const int64_t P = B / 2;
  const bool normalizes = metric != Metric::E;

  // 1-2. The embeddings as the metric sees them, and the mining distances (f64 copies of T).
  std::vector<T> y(x, x + B * D), x_norm(static_cast<size_t>(B), T(0));
  if (normalizes) l2_normalize_forward_cpu<T>(x, B, D, T(kNormEps), y.data(), x_norm.data());
  std::vector<T> mining_t(static_cast<size_t>(B * B));
  pairwise_distance_forward_fast_cpu<T>(
      y.data(), y.data(), B, B, D,
      metric == Metric::C ? PairwiseMetric::Cosine : PairwiseMetric::Euclidean, T(kCosineEps),
      mining_t.data());
  const std::vector<double> dist(mining_t.begin(), mining_t.end());

  // 3-4. Mining, with the 2P uniforms of engine::uniform({2P}, 0, 1, gen, F64).
  std::vector<double> draws(static_cast<size_t>(P * kMiningDrawsPerAnchor));
  random_uniform_cpu<double>(P * kMiningDrawsPerAnchor, seed, offset, 0.0, 1.0, draws.data());
  std::vector<double> mined_hardness(static_cast<size_t>(P));
  mine_triplets_cpu(dist.data(), labels, B, D, miner, margin, draws.data(), anchor, positive,
                    negative, mined_hardness.data());
  for (int64_t i = 0; i < P; ++i) hardness[i] = static_cast<T>(mined_hardness[i]);

  // 5-6. The loss on the f64 copies of y, and its gradient with respect to y (N, E) or to
  // yh = y / |y| (C), scattered per triplet.
  const std::vector<double> yd(y.begin(), y.end());
  std::vector<double> y_norm(static_cast<size_t>(B)), yh(yd);
  for (int64_t r = 0; r < B; ++r) {
    y_norm[r] = std::sqrt(dot(&yd[r * D], &yd[r * D], D));
    const double divisor = std::max(y_norm[r], kNormEps);
    for (int64_t k = 0; k < D; ++k) yh[r * D + k] = yd[r * D + k] / divisor;
  }
  std::vector<double> g(grad ? static_cast<size_t>(B * D) : 0, 0.0);
  double hinge_sum = 0.0;
  std::vector<double> u(static_cast<size_t>(D)), v(static_cast<size_t>(D));
  for (int64_t i = 0; i < P; ++i) {
    const int64_t a = anchor[i], p = positive[i], n = negative[i];
    double dap = 0.0, dan = 0.0;
    if (metric == Metric::C) {
      dap = 1.0 - dot(&yh[a * D], &yh[p * D], D);
      dan = 1.0 - dot(&yh[a * D], &yh[n * D], D);
    } else {
      for (int64_t k = 0; k < D; ++k) {
        u[k] = yd[a * D + k] - yd[p * D + k] + kRowDistanceEps;
        v[k] = yd[a * D + k] - yd[n * D + k] + kRowDistanceEps;
      }
      dap = std::sqrt(dot(u.data(), u.data(), D));
      dan = std::sqrt(dot(v.data(), v.data(), D));
    }
    const double h = dap - dan + margin;
    if (!(h > 0.0)) continue;  // relu: no loss, no gradient (also at exactly 0)
    hinge_sum += h;
    if (!grad) continue;
    const double scale = 1.0 / static_cast<double>(P);
    for (int64_t k = 0; k < D; ++k) {
      if (metric == Metric::C) {
        g[a * D + k] += scale * (yh[n * D + k] - yh[p * D + k]);
        g[p * D + k] -= scale * yh[a * D + k];
        g[n * D + k] += scale * yh[a * D + k];
      } else {
        const double up = dap > 0.0 ? scale * u[k] / dap : 0.0;
        const double vn = dan > 0.0 ? scale * v[k] / dan : 0.0;
        g[a * D + k] += up - vn;
        g[p * D + k] -= up;
        g[n * D + k] += vn;
      }
    }
  }
  *loss = static_cast<T>(hinge_sum / static_cast<double>(P));
  if (!grad) return;

  // Back through the normalizations, row by row: yh = y / |y| (C), then y = x / |x| (N, C) with
  // the norm the forward divided by (rounded to T, as the engine saves it).
  std::vector<double> xd(x, x + B * D);
  for (int64_t r = 0; r < B; ++r) {
    double* g_row = &g[r * D];
    if (metric == Metric::C) normalize_backward(&yd[r * D], y_norm[r], D, g_row);
    if (normalizes) normalize_backward(&xd[r * D], static_cast<double>(x_norm[r]), D, g_row);
    for (int64_t k = 0; k < D; ++k) grad[r * D + k] = static_cast<T>(g_row[k]);
  }
}

template void fused_triplet_cpu<float>(const float*, const int64_t*, int64_t, int64_t, Miner,
                                       Metric, double, uint64_t, uint64_t, float*, float*, int64_t*,
                                       int64_t*, int64_t*, float*);
template void fused_triplet_cpu<double>(const double*, const int64_t*, int64_t, int64_t, Miner,
                                        Metric, double, uint64_t, uint64_t, double*, double*,
                                        int64_t*, int64_t*, int64_t*, double*);

}  // namespace engine::kernels
