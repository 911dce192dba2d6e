// Seeded k-means++ / Lloyd and NMI (definitions, tie rules and cost in clustering.h).
#include "metrics/clustering.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "engine/random.h"
#include "kernels/common/check.h"
#include "kernels/common/cpu_gemm.h"
#include "metrics/labels.h"

namespace metrics {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr int64_t kPointTile = 256;
constexpr int64_t kCenterTile = 4096;

float squared_norm(const float* c, int64_t d) {
  double s = 0.0;
  for (int64_t k = 0; k < d; ++k) s += static_cast<double>(c[k]) * c[k];
  return static_cast<float>(s);
}

// k-means++ seeding; returns the chosen point indices.
std::vector<int64_t> kmeanspp_init(const Points& p, int64_t k, uint64_t seed) {
  const int64_t n = p.n;
  engine::Generator gen(seed);
  const std::vector<double> u = engine::uniform({k}, 0.0, 1.0, gen, engine::DType::F64).to_vector();
  std::vector<int64_t> chosen;
  std::vector<char> is_chosen(static_cast<size_t>(n), 0);
  std::vector<float> nearest(static_cast<size_t>(n), std::numeric_limits<float>::infinity());
  int64_t next = std::min(static_cast<int64_t>(u[0] * static_cast<double>(n)), n - 1);
  for (int64_t t = 0;; ++t) {
    chosen.push_back(next);
    is_chosen[next] = 1;
    if (t + 1 == k) break;
    const float c_sq = p.sq_norms[next];
    Eigen::Map<const Eigen::VectorXf> c(p.row(next), p.d);
    const int64_t tiles = (n + kPointTile - 1) / kPointTile;
    // One GEMV per tile of points (Eigen vectorizes the dot products; a plain float loop would
    // be a scalar dependency chain under strict IEEE ordering).
#pragma omp parallel for schedule(static)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t i0 = tile * kPointTile;
      const int64_t rows = std::min(kPointTile, n - i0);
      Eigen::Map<const RowMatrix> x(p.row(i0), rows, p.d);
      const Eigen::VectorXf dots = x * c;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        // A chosen point is at distance 0 by index, whatever the rounding of the expansion says.
        const float d2 =
            is_chosen[i] ? 0.0f : std::max(p.sq_norms[i] + c_sq - 2.0f * dots[r], 0.0f);
        nearest[i] = std::min(nearest[i], d2);
      }
    }
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) total += nearest[i];
    if (!(total > 0.0)) {  // every point sits on a chosen center: take the first unchosen one
      next = std::find(is_chosen.begin(), is_chosen.end(), 0) - is_chosen.begin();
      continue;
    }
    const double target = u[t + 1] * total;
    double cumulative = 0.0;
    next = -1;
    int64_t last_positive = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (nearest[i] <= 0.0f) continue;
      last_positive = i;
      cumulative += nearest[i];
      if (cumulative > target) {
        next = i;
        break;
      }
    }
    if (next < 0) next = last_positive;  // target at the very top of the range after rounding
  }
  return chosen;
}

// Nearest center of every point (ties: smaller center index). Returns the number of points whose
// assignment changed; `dist2` receives the squared distance to the assigned center.
int64_t assign(const Points& p, const std::vector<float>& centers, int64_t k,
               std::vector<int64_t>& assignment, std::vector<float>& dist2) {
  const int64_t n = p.n;
  const int64_t d = p.d;
  std::vector<float> c_sq(static_cast<size_t>(k));
  for (int64_t c = 0; c < k; ++c) c_sq[c] = squared_norm(centers.data() + c * d, d);
  const int64_t tiles = (n + kPointTile - 1) / kPointTile;
  const int64_t ct = std::min(kCenterTile, k);
  int64_t changed = 0;
  engine::kernels::use_fixed_gemm_blocking();  // scores independent of the CPU model (cpu_gemm.h)
#pragma omp parallel reduction(+ : changed)
  {
    RowMatrix scores(kPointTile, ct);
#pragma omp for schedule(dynamic, 1)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t i0 = tile * kPointTile;
      const int64_t rows = std::min(kPointTile, n - i0);
      std::vector<float> best(static_cast<size_t>(rows), std::numeric_limits<float>::infinity());
      std::vector<int64_t> best_c(static_cast<size_t>(rows), 0);
      Eigen::Map<const RowMatrix> x(p.row(i0), rows, d);
      for (int64_t c0 = 0; c0 < k; c0 += ct) {
        const int64_t cols = std::min(ct, k - c0);
        Eigen::Map<const RowMatrix> cm(centers.data() + c0 * d, cols, d);
        scores.topLeftCorner(rows, cols).noalias() = x * cm.transpose();
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < cols; ++j) {
            // |x - c|^2 - |x|^2: the |x|^2 term is the same for every center.
            const float s = c_sq[c0 + j] - 2.0f * scores(r, j);
            if (s < best[r]) {  // strict: the first (smallest) center index wins a tie
              best[r] = s;
              best_c[r] = c0 + j;
            }
          }
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        if (assignment[i] != best_c[r]) ++changed;
        assignment[i] = best_c[r];
        dist2[i] = std::max(p.sq_norms[i] + best[r], 0.0f);
      }
    }
  }
  return changed;
}

// Centers = means of their points; empty ones move to the farthest points (clustering.h).
void update_centers(const Points& p, int64_t k, const std::vector<int64_t>& assignment,
                    const std::vector<float>& dist2, std::vector<float>& centers) {
  const int64_t d = p.d;
  std::vector<double> sums(static_cast<size_t>(k * d), 0.0);
  std::vector<int64_t> counts(static_cast<size_t>(k), 0);
  for (int64_t i = 0; i < p.n; ++i) {
    const int64_t c = assignment[i];
    ++counts[c];
    const float* x = p.row(i);
    double* s = sums.data() + c * d;
    for (int64_t j = 0; j < d; ++j) s[j] += x[j];
  }
  std::vector<int64_t> far_order;  // built only if some center is empty
  size_t far_next = 0;
  for (int64_t c = 0; c < k; ++c) {
    float* center = centers.data() + c * d;
    if (counts[c] > 0) {
      const double inv = 1.0 / static_cast<double>(counts[c]);
      for (int64_t j = 0; j < d; ++j) center[j] = static_cast<float>(sums[c * d + j] * inv);
      continue;
    }
    if (far_order.empty()) {
      far_order.resize(static_cast<size_t>(p.n));
      for (int64_t i = 0; i < p.n; ++i) far_order[i] = i;
      std::stable_sort(far_order.begin(), far_order.end(),
                       [&](int64_t a, int64_t b) { return dist2[a] > dist2[b]; });
    }
    const int64_t donor = far_order[far_next++ % far_order.size()];
    std::copy(p.row(donor), p.row(donor) + d, center);
  }
}

// One k-means++ initialization from `seed`, iterated (the file's header).
KMeansResult kmeans_once(const Points& points, const KMeansOptions& options, uint64_t seed) {
  const int64_t n = points.n;
  const int64_t k = options.k;
  const int64_t d = points.d;
  KMeansResult result;
  result.centers.resize(static_cast<size_t>(k * d));
  const std::vector<int64_t> seeds = kmeanspp_init(points, k, seed);
  for (int64_t c = 0; c < k; ++c) {
    std::copy(points.row(seeds[c]), points.row(seeds[c]) + d, result.centers.begin() + c * d);
  }
  result.assignment.assign(static_cast<size_t>(n), -1);
  std::vector<float> dist2(static_cast<size_t>(n));
  for (int64_t it = 1;; ++it) {
    const int64_t changed = assign(points, result.centers, k, result.assignment, dist2);
    result.iterations = it;
    if (changed == 0) {
      result.converged = true;
      break;
    }
    if (it == options.max_iterations) break;
    update_centers(points, k, result.assignment, dist2, result.centers);
  }
  for (int64_t i = 0; i < n; ++i) result.inertia += dist2[i];
  return result;
}

}  // namespace

KMeansResult kmeans(const Points& points, const KMeansOptions& options) {
  ENGINE_CHECK(options.k >= 1 && options.k <= points.n, "kmeans: k = ", options.k, " clusters for ",
               points.n, " points (need 1 <= k <= N)");
  ENGINE_CHECK(options.max_iterations >= 1, "kmeans: max_iterations must be >= 1, got ",
               options.max_iterations);
  ENGINE_CHECK(options.restarts >= 1, "kmeans: restarts must be >= 1, got ", options.restarts);
  KMeansResult best = kmeans_once(points, options, options.seed);
  for (int64_t r = 1; r < options.restarts; ++r) {
    KMeansResult run = kmeans_once(points, options, options.seed + static_cast<uint64_t>(r));
    if (run.inertia < best.inertia) best = std::move(run);  // a tie keeps the earlier run
  }
  return best;
}

double normalized_mutual_info(const std::vector<int64_t>& labels,
                              const std::vector<int64_t>& clusters) {
  ENGINE_CHECK(labels.size() == clusters.size(), "nmi: ", labels.size(), " labels but ",
               clusters.size(), " cluster ids");
  const LabelGroups u = group_by_label(labels);
  const LabelGroups v = group_by_label(clusters);
  const size_t nu = u.classes.size(), nv = v.classes.size();
  if ((nu == 1 && nv == 1) || (nu == 0 && nv == 0)) return 1.0;  // scikit-learn's limit case

  // The contingency table's nonzero cells: sort the (u, v) pairs and count runs.
  const int64_t n = static_cast<int64_t>(labels.size());
  std::vector<std::pair<int64_t, int64_t>> pairs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pairs[i] = {u.class_of[i], v.class_of[i]};
  std::sort(pairs.begin(), pairs.end());
  const double total = static_cast<double>(n);
  const double log_n = std::log(total);
  double mi = 0.0;
  for (int64_t i = 0; i < n;) {
    int64_t j = i;
    while (j < n && pairs[j] == pairs[i]) ++j;
    const double cell = static_cast<double>(j - i);
    const double a = static_cast<double>(u.members[pairs[i].first].size());
    const double b = static_cast<double>(v.members[pairs[i].second].size());
    mi += cell / total * (std::log(cell) + log_n - std::log(a) - std::log(b));
    i = j;
  }
  mi = std::max(mi, 0.0);
  if (mi == 0.0) return 0.0;
  auto entropy = [&](const LabelGroups& g) {
    double h = 0.0;
    for (const auto& m : g.members) {
      const double p = static_cast<double>(m.size()) / total;
      h -= p * std::log(p);
    }
    return h;
  };
  const double normalizer = 0.5 * (entropy(u) + entropy(v));
  return mi / std::max(normalizer, std::numeric_limits<double>::epsilon());
}

double clustering_nmi(const Points& points, const std::vector<int64_t>& labels, uint64_t seed,
                      int64_t max_iterations, int64_t restarts) {
  ENGINE_CHECK(static_cast<int64_t>(labels.size()) == points.n, "nmi: ", labels.size(),
               " labels for ", points.n, " embeddings");
  if (points.n == 0) return 1.0;
  KMeansOptions options;
  options.k = static_cast<int64_t>(group_by_label(labels).classes.size());
  options.seed = seed;
  options.max_iterations = max_iterations;
  options.restarts = restarts;
  return normalized_mutual_info(labels, kmeans(points, options).assignment);
}

}  // namespace metrics
