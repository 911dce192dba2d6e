// pi_ratio from tiles of gathered rows (definition and cost in spread.h).
#include "metrics/spread.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/common/check.h"
#include "metrics/labels.h"

namespace metrics {

namespace {

constexpr int64_t kTile = 256;

// Sum of d(x_i, x_j) over ordered pairs i != j (by position in `rows`) for i in the row tile
// starting at `i0`, j over all of `rows`. f64 sum in a fixed (tile, row, column) order.
double pair_distance_sum(const Points& points, const std::vector<int64_t>& rows, int64_t i0,
                         std::vector<float>& keys) {
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t m = std::min(kTile, n - i0);
  const Points a = gather_points(points, rows.data() + i0, m);
  double sum = 0.0;
  for (int64_t j0 = 0; j0 < n; j0 += kTile) {
    const int64_t nb = std::min(kTile, n - j0);
    const Points b = gather_points(points, rows.data() + j0, nb);
    key_tile(a, 0, m, b, 0, nb, keys.data(), kTile);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < nb; ++c) {
        if (i0 + r == j0 + c) continue;  // the pair (i, i), excluded by index
        sum += key_to_distance(points.metric, keys[r * kTile + c]);
      }
    }
  }
  return sum;
}

// One unit of parallel work: the row tile starting at i0 of group `group`, against the whole group.
struct TileJob {
  int64_t group;
  int64_t i0;
};

std::vector<double> run_jobs(const Points& points, const std::vector<std::vector<int64_t>>& groups,
                             const std::vector<TileJob>& jobs) {
  std::vector<double> sums(jobs.size(), 0.0);
  const int64_t count = static_cast<int64_t>(jobs.size());
#pragma omp parallel
  {
    std::vector<float> keys(static_cast<size_t>(kTile * kTile));
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < count; ++t) {
      sums[t] = pair_distance_sum(points, groups[jobs[t].group], jobs[t].i0, keys);
    }
  }
  return sums;
}

}  // namespace

Spread embedding_spread(const Points& points, const std::vector<int64_t>& labels) {
  ENGINE_CHECK(static_cast<int64_t>(labels.size()) == points.n, "pi_ratio: ", labels.size(),
               " labels for ", points.n, " embeddings");
  const LabelGroups g = group_by_label(labels);
  const int64_t classes = static_cast<int64_t>(g.classes.size());
  const double nan = std::numeric_limits<double>::quiet_NaN();

  // pi_intra: one job per (class, tile of its rows).
  std::vector<TileJob> jobs;
  for (int64_t c = 0; c < classes; ++c) {
    const int64_t n = static_cast<int64_t>(g.members[c].size());
    if (n < 2) continue;
    for (int64_t i0 = 0; i0 < n; i0 += kTile) jobs.push_back({c, i0});
  }
  const std::vector<double> intra_sums = run_jobs(points, g.members, jobs);
  std::vector<double> class_sum(static_cast<size_t>(classes), 0.0);
  for (size_t t = 0; t < jobs.size(); ++t) class_sum[jobs[t].group] += intra_sums[t];
  Spread s;
  double intra = 0.0;
  for (int64_t c = 0; c < classes; ++c) {
    const double n = static_cast<double>(g.members[c].size());
    if (n < 2) continue;
    ++s.classes_with_pairs;
    intra += class_sum[c] / (n * (n - 1.0));
  }
  s.intra = s.classes_with_pairs ? intra / static_cast<double>(s.classes_with_pairs) : nan;

  // pi_inter: the class means, all ordered pairs of distinct classes.
  if (classes >= 2) {
    const Points means =
        group_means(points, g.members, points.metric == Metric::C ? Metric::C : Metric::E);
    std::vector<int64_t> all(static_cast<size_t>(classes));
    for (int64_t c = 0; c < classes; ++c) all[c] = c;
    std::vector<TileJob> mean_jobs;
    for (int64_t i0 = 0; i0 < classes; i0 += kTile) mean_jobs.push_back({0, i0});
    const std::vector<double> sums = run_jobs(means, {all}, mean_jobs);
    double inter = 0.0;
    for (double v : sums) inter += v;
    const double cc = static_cast<double>(classes);
    s.inter = inter / (cc * (cc - 1.0));
  } else {
    s.inter = nan;
  }
  s.ratio =
      (std::isfinite(s.intra) && std::isfinite(s.inter) && s.inter > 0.0) ? s.intra / s.inter : nan;
  return s;
}

}  // namespace metrics
