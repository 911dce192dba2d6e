// Fused SPC-2 triplet loss, CPU twin: the oracle of the CUDA kernels (math, layout and cost in
// triplet.h). Plain loops; the mining distances are computed by the engine's own l2_normalize and
// pairwise_distance CPU kernels (the fast path, which the pairwise_distance op runs on the CPU),
// so they are bit for bit the distances losses::mine_triplets mines on, and the mining rules below
// are those of losses/miners.cpp, written out again.
#include <algorithm>
#include <cmath>
#include <limits>
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
constexpr int64_t kDrawsPerAnchor = 2;    // losses::mine_triplets draws 2 uniforms per anchor

// One anchor's row of the mining distance matrix and who shares its label.
struct AnchorRow {
  const double* d;
  const int64_t* labels;
  int64_t label;
  int64_t batch;

  bool same(int64_t j) const { return labels[j] == label; }
};

// candidates[floor(u n)]: the uniform pick of losses/miners.cpp (u < 1, so the clamp only guards
// against rounding).
int64_t pick_uniform(const std::vector<int64_t>& candidates, double u) {
  const auto n = static_cast<int64_t>(candidates.size());
  int64_t k = static_cast<int64_t>(u * static_cast<double>(n));
  if (k >= n) k = n - 1;
  return candidates[static_cast<size_t>(k)];
}

std::vector<int64_t> all_items(int64_t batch) {
  std::vector<int64_t> items;
  for (int64_t j = 0; j < batch; ++j) items.push_back(j);
  return items;
}

std::vector<int64_t> different_label_items(const AnchorRow& row) {
  std::vector<int64_t> items;
  for (int64_t j = 0; j < row.batch; ++j) {
    if (!row.same(j)) items.push_back(j);
  }
  return items;
}

// Random: uniform over different-label items, or over all items when there is none.
int64_t random_negative(const AnchorRow& row, double u) {
  const std::vector<int64_t> negatives = different_label_items(row);
  return pick_uniform(negatives.empty() ? all_items(row.batch) : negatives, u);
}

// Semihard: uniform over the margin band d(a,p)^2 < d(a,n)^2, d(a,p) - d(a,n) + m > 0 among
// different-label items; else as Random.
int64_t semihard_negative(const AnchorRow& row, int64_t positive, double margin, double u) {
  const double dap = row.d[positive];
  std::vector<int64_t> band;
  for (int64_t j = 0; j < row.batch; ++j) {
    const double daj = row.d[j];
    if (!row.same(j) && dap * dap < daj * daj && dap - daj + margin > 0.0) band.push_back(j);
  }
  return band.empty() ? random_negative(row, u) : pick_uniform(band, u);
}

// Softhard: negatives closer than the farthest same-label item, positives farther than the
// nearest different-label item (squared comparisons, the anchor itself a same-label item).
void softhard_pair(const AnchorRow& row, int64_t partner, double u_negative, double u_positive,
                   int64_t& positive, int64_t& negative) {
  const std::vector<int64_t> negatives = different_label_items(row);
  if (negatives.empty()) {
    negative = pick_uniform(all_items(row.batch), u_negative);
    positive = partner;
    return;
  }
  std::vector<int64_t> positives;
  double farthest_same = -std::numeric_limits<double>::infinity();
  double nearest_other = std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < row.batch; ++j) {
    if (row.same(j)) {
      positives.push_back(j);
      if (row.d[j] > farthest_same) farthest_same = row.d[j];
    } else if (row.d[j] < nearest_other) {
      nearest_other = row.d[j];
    }
  }
  std::vector<int64_t> soft_negatives, soft_positives;
  for (int64_t j : negatives) {
    if (row.d[j] * row.d[j] < farthest_same * farthest_same) soft_negatives.push_back(j);
  }
  for (int64_t j : positives) {
    if (row.d[j] * row.d[j] > nearest_other * nearest_other) soft_positives.push_back(j);
  }
  negative = pick_uniform(soft_negatives.empty() ? negatives : soft_negatives, u_negative);
  positive = pick_uniform(soft_positives.empty() ? positives : soft_positives, u_positive);
}

// Distance-weighted: P(n) proportional to exp(w_n - max w), w = (2 - D) log d - ((D - 3)/2)
// log(1 - d^2/4) for different-label n, w = 0 for same-label items (they count in the max, then
// weigh 0); a NaN w makes the max NaN; NaN weights are 0; all weights 0 -> uniform over all.
int64_t distance_weighted_negative(const AnchorRow& row, int64_t dim, double u) {
  const double D = static_cast<double>(dim);
  std::vector<double> log_weight(static_cast<size_t>(row.batch), 0.0);
  double max_log_weight = -std::numeric_limits<double>::infinity();
  bool any_nan = false;
  for (int64_t j = 0; j < row.batch; ++j) {
    double w = 0.0;
    if (!row.same(j)) {
      const double d = row.d[j];
      w = (2.0 - D) * std::log(d) - ((D - 3.0) / 2.0) * std::log(1.0 - 0.25 * d * d);
    }
    log_weight[static_cast<size_t>(j)] = w;
    if (std::isnan(w)) any_nan = true;
    if (w > max_log_weight) max_log_weight = w;
  }
  if (any_nan) max_log_weight = std::numeric_limits<double>::quiet_NaN();

  std::vector<double> weight(static_cast<size_t>(row.batch), 0.0);
  double total = 0.0;
  for (int64_t j = 0; j < row.batch; ++j) {
    if (row.same(j)) continue;
    double w = std::exp(log_weight[static_cast<size_t>(j)] - max_log_weight);
    if (std::isnan(w)) w = 0.0;
    weight[static_cast<size_t>(j)] = w;
    total += w;
  }
  if (!(total > 0.0)) return pick_uniform(all_items(row.batch), u);
  // The first j whose running sum passes u * total; the last positive weight if rounding
  // leaves u * total at the full sum.
  const double target = u * total;
  double running = 0.0;
  int64_t last_positive = -1;
  for (int64_t j = 0; j < row.batch; ++j) {
    const double w = weight[static_cast<size_t>(j)];
    if (w <= 0.0) continue;
    running += w;
    last_positive = j;
    if (running > target) return j;
  }
  return last_positive;
}

// Hardest: the different-label item with the smallest nonzero distance (first on ties); all of
// them at 0 -> the first; none -> uniform over all items.
int64_t hardest_negative(const AnchorRow& row, double u) {
  int64_t best = -1, first_zero = -1;
  for (int64_t j = 0; j < row.batch; ++j) {
    if (row.same(j)) continue;
    if (row.d[j] == 0.0) {
      if (first_zero < 0) first_zero = j;
      continue;
    }
    if (best < 0 || row.d[j] < row.d[best]) best = j;
  }
  if (best >= 0) return best;
  if (first_zero >= 0) return first_zero;
  return pick_uniform(all_items(row.batch), u);
}

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

template <typename T>
void fused_triplet_cpu(const T* x, const int64_t* labels, int64_t B, int64_t D, TripletMiner miner,
                       TripletMetric metric, double margin, uint64_t seed, uint64_t offset, T* loss,
                       T* grad, int64_t* anchor, int64_t* positive, int64_t* negative,
                       T* hardness) {
  ENGINE_CHECK(B >= 2 && B % 2 == 0 && B <= kFusedTripletMaxBatch && D >= 1,
               "fused_triplet_cpu: expected an SPC-2 batch [B, D] with B even, 2 <= B <= ",
               kFusedTripletMaxBatch, " and D >= 1, got [", B, ", ", D, "]");
  ENGINE_CHECK(std::isfinite(margin), "fused_triplet_cpu: margin must be finite, got ", margin);
  for (int64_t i = 0; i < B; i += 2) {
    ENGINE_CHECK(labels[i] == labels[i + 1], "fused_triplet_cpu: SPC-2 batch [", B, ", ", D,
                 "] expects labels[", i, "] == labels[", i + 1, "], got ", labels[i], " and ",
                 labels[i + 1]);
  }
  const int64_t P = B / 2;
  const bool normalizes = metric != TripletMetric::Euclidean;

  // 1-2. The embeddings as the metric sees them, and the mining distances (f64 copies of T).
  std::vector<T> y(x, x + B * D), x_norm(static_cast<size_t>(B), T(0));
  if (normalizes) l2_normalize_forward_cpu<T>(x, B, D, T(kNormEps), y.data(), x_norm.data());
  std::vector<T> mining_t(static_cast<size_t>(B * B));
  pairwise_distance_forward_fast_cpu<T>(
      y.data(), y.data(), B, B, D,
      metric == TripletMetric::Cosine ? PairwiseMetric::Cosine : PairwiseMetric::Euclidean,
      T(kCosineEps), mining_t.data());
  const std::vector<double> dist(mining_t.begin(), mining_t.end());

  // 3-4. Mining, with the 2P uniforms of engine::uniform({2P}, 0, 1, gen, F64).
  std::vector<double> draws(static_cast<size_t>(P * kDrawsPerAnchor));
  random_uniform_cpu<double>(draws.data(), P * kDrawsPerAnchor, seed, offset, 0.0, 1.0);
  for (int64_t i = 0; i < P; ++i) {
    const int64_t a = 2 * i, partner = 2 * i + 1;
    const AnchorRow row{dist.data() + a * B, labels, labels[a], B};
    const double u0 = draws[static_cast<size_t>(i * kDrawsPerAnchor)];
    const double u1 = draws[static_cast<size_t>(i * kDrawsPerAnchor + 1)];
    int64_t p = partner, n = 0;
    switch (miner) {
      case TripletMiner::Random:
        n = random_negative(row, u0);
        break;
      case TripletMiner::Semihard:
        n = semihard_negative(row, partner, margin, u0);
        break;
      case TripletMiner::Softhard:
        softhard_pair(row, partner, u0, u1, p, n);
        break;
      case TripletMiner::Distance:
        n = distance_weighted_negative(row, D, u0);
        break;
      case TripletMiner::Hardest:
        n = hardest_negative(row, u0);
        break;
    }
    anchor[i] = a;
    positive[i] = p;
    negative[i] = n;
    hardness[i] = static_cast<T>(row.d[p] - row.d[n]);
  }

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
    if (metric == TripletMetric::Cosine) {
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
      if (metric == TripletMetric::Cosine) {
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
    if (metric == TripletMetric::Cosine) normalize_backward(&yd[r * D], y_norm[r], D, g_row);
    if (normalizes) normalize_backward(&xd[r * D], static_cast<double>(x_norm[r]), D, g_row);
    for (int64_t k = 0; k < D; ++k) grad[r * D + k] = static_cast<T>(g_row[k]);
  }
}

template void fused_triplet_cpu<float>(const float*, const int64_t*, int64_t, int64_t, TripletMiner,
                                       TripletMetric, double, uint64_t, uint64_t, float*, float*,
                                       int64_t*, int64_t*, int64_t*, float*);
template void fused_triplet_cpu<double>(const double*, const int64_t*, int64_t, int64_t,
                                        TripletMiner, TripletMetric, double, uint64_t, uint64_t,
                                        double*, double*, int64_t*, int64_t*, int64_t*, double*);

}  // namespace engine::kernels
