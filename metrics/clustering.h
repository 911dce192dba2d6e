// Clustering quality: our own seeded k-means++ and NMI (docs/architecture.md). robrank uses faiss
// k-means and scikit-learn's NMI (robrank utils.py); we do not depend on either, so this file
// defines exactly what we compute.
//
// k-means (Lloyd) on the prepared points (distance.h: L2-normalized rows for metrics N and C, raw
// rows for E), objective sum_i |x_i - c_{a(i)}|^2:
//   init (k-means++, Arthur & Vassilvitskii 2007, one candidate per step): the first center is
//     the point floor(u_0 * N) (u_0 uniform in [0, 1) from Philox, engine/random.h, seeded by
//     `seed`); center t is point j with probability D(j)^2 / sum D^2, D(j) = the distance to the
//     nearest chosen center, drawn by inverting the cumulative sum (f64, index order) at u_t * sum.
//     If every point coincides with a chosen center (fewer distinct points than k), the smallest
//     index not chosen yet is taken.
//   iterate: assign each point to the nearest center (squared Euclidean; an exact tie goes to the
//     smaller center index); stop when no assignment changed (converged) or after max_iterations
//     assignment steps; otherwise move each center to the mean of its points (f64 sums in point
//     order). Centers left with no point, in increasing center order, are moved onto the points
//     farthest from their assigned centers (the farthest first; ties: smaller point index), so
//     the next assignment splits the worst-fitted region instead of keeping a dead center.
//   result: the last assignment, its inertia, the iteration count, and whether it converged.
//   restarts R: R such runs, run r seeded with seed + r; the result is the run of least inertia
//     (a tie keeps the earlier run), as scikit-learn's n_init keeps its best. R = 1 (the default)
//     is the single run robrank, PML and MDProp's code make (faiss' nredo = 1). One run's NMI
//     depends on its seed, on a trained Fashion-MNIST model by up to 4.7 points; with R = 20 the
//     NMI of each of three such models was the same from seeds 0 and 100 (results:
//     docs/results/fashion-c2f2-bn-mdprop-st.md), with R = 5 not always.
// Everything is deterministic for a given seed: the random numbers depend only on the seed, and
// every sum is in a fixed order independent of the thread count.
//
// Cost per iteration: the N x k distance GEMM (2 N k d FLOPs, tiles of 256 points x 4096 centers,
// memory O(threads * 256 * 4096)) + O(N d) for the means. Init: k passes of O(N d) (a GEMV each,
// memory bound: k N d floats read).
//
// NMI (arithmetic mean normalization, scikit-learn's default):
//   MI = sum_{u,v} (n_uv / N) ln(N n_uv / (a_u b_v)),  H(U) = -sum_u (a_u / N) ln(a_u / N)
//   NMI = MI / ((H(U) + H(V)) / 2), with NMI = 1 when both labelings have a single group (or the
//   set is empty), and 0 when the denominator is 0 otherwise (scikit-learn's limit cases).
#pragma once

#include <cstdint>
#include <vector>

#include "metrics/distance.h"

namespace metrics {

struct KMeansOptions {
  int64_t k = 0;  // number of clusters, 1 <= k <= N
  uint64_t seed = 0;
  // Assignment steps, so at most max_iterations - 1 center updates. faiss' niter = 25, as robrank
  // runs it, is 25 assign-and-update rounds and a final assignment (26 assignments); the parity
  // is nominal anyway, since faiss seeds at random on a subsample. MDProp's own NMI runs faiss
  // with niter = 20 on every point (no subsample); all three normalize NMI arithmetically.
  int64_t max_iterations = 25;
  int64_t restarts = 1;  // k-means++ initializations; the least-inertia run is kept
};

struct KMeansResult {
  std::vector<int64_t> assignment;  // N cluster ids in [0, k)
  std::vector<float> centers;       // k x d, row-major
  double inertia = 0.0;             // sum of squared distances to the assigned centers
  int64_t iterations = 0;           // assignment steps taken
  bool converged = false;           // the last step changed nothing
};

KMeansResult kmeans(const Points& points, const KMeansOptions& options);

// Any two labelings of the same N items (values are ids, not necessarily 0..C-1).
double normalized_mutual_info(const std::vector<int64_t>& labels,
                              const std::vector<int64_t>& clusters);

// k-means with k = the number of distinct labels, then NMI against the labels.
double clustering_nmi(const Points& points, const std::vector<int64_t>& labels, uint64_t seed,
                      int64_t max_iterations = 25, int64_t restarts = 1);

}  // namespace metrics
