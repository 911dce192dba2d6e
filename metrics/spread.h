// Embedding-space density pi_ratio (MDProp §A.3, eqs. 11-13, normalized as issue 5 specifies):
//
//   pi_intra = mean over classes y with n_y >= 2 of
//                (1 / (n_y (n_y - 1))) sum_{i != j in class y} d(x_i, x_j)   (ordered pairs, i != j
//                                                                           by index)
//   pi_inter = (1 / (C (C - 1))) sum_{l != k} d(mu_l, mu_k)                    (distinct classes)
//   pi_ratio = pi_intra / pi_inter
//
// d is the metric's distance (distance.h) on the prepared points: Euclidean on L2-normalized rows
// for N, on raw rows for E, 1 - cos for C. mu_y is the mean of class y's prepared rows: plain for N
// and E, L2-normalized for C (which changes nothing: the cosine distance of the means does not
// depend on their norms). The distances come from the squared-norm form |a|^2 + |b|^2 - 2 a.b in
// f32, clamped at 0, so a collapsed class (identical rows) measures a few 1e-4 rather than 0 at
// D = 512: negligible beside real intra-class distances (0.3 to 0.6 on Fashion-MNIST). Classes
// with a single member have no pair and are left out of pi_intra; pi_ratio is NaN when no class
// has two members, fewer than two classes exist, or all class means coincide.
//
// What the reported pi_ratio is (metrics/evaluate.h): issue 5 puts it on L2-normalized
// embeddings, so evaluate_embeddings measures metric E's sets as N (Euclidean on unit rows).
// MDProp's numbers come from the "Revisiting DML" code (metrics/dists.py, intra_over_inter):
// cosine distances, class means re-normalized, a singleton class's undefined intra distance
// replaced by a maximum over the other classes. Metric C here is that up to the singletons (none
// in CUB, CARS or SOP's test splits); N's Euclidean sqrt(2 (1 - cos)) gives other numbers, so
// compare N values with N values only.
//
// Cost: sum_y n_y^2 d multiply-adds for pi_intra (at most N^2 d) and C^2 d for pi_inter, in
// GEMM tiles of 256 x 256 gathered rows (memory O(threads * 256 * (256 + 2 d))); the mean is in
// f64, summed per tile in a fixed order (deterministic). Parallelization: OpenMP over tiles.
#pragma once

#include <cstdint>
#include <vector>

#include "metrics/distance.h"

namespace metrics {

struct Spread {
  double intra = 0.0;  // pi_intra
  double inter = 0.0;  // pi_inter
  double ratio = 0.0;  // pi_ratio
  int64_t classes_with_pairs = 0;
};

Spread embedding_spread(const Points& points, const std::vector<int64_t>& labels);

}  // namespace metrics
