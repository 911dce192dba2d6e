// The triplet miners of losses/miners.h as warp-cooperative device functions, for
// triplet_cuda.cu's mine_kernel (one warp per anchor; why and how: the header comment there).
//
// Every function here is called by all 32 lanes of a warp with the same arguments and returns the
// same value on every lane: candidate counts come from __ballot_sync / __popc over the anchor's
// row of B distances, 32 items at a time; "the rank-th candidate in index order" walks the same
// ballots; min / max / argmin are shuffle reductions. Comparisons are those of the CPU twin
// (kernels/triplet/triplet_cpu.cpp), in f64 on the f32 mining distances.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/reduction.cuh"

namespace engine::kernels::triplet_mining {

// The candidate sets of the mining rules (losses/miners.h).
enum class Candidates {
  All,
  SameLabel,
  DifferentLabel,
  SemihardBand,
  SoftNegatives,
  SoftPositives
};

// One anchor's row, seen by its warp.
struct AnchorRow {
  const float* d;  // d[j]: mining distance from the anchor to item j
  const int64_t* labels;
  int64_t label;
  int B;
  double d_partner = 0.0;      // semihard: d(a, partner)
  double margin = 0.0;         // semihard band width
  double farthest_same = 0.0;  // softhard: max over same-label d (the anchor included)
  double nearest_other = 0.0;  // softhard: min over different-label d
};

__device__ inline bool is_candidate(const AnchorRow& row, Candidates set, int j) {
  const bool same = row.labels[j] == row.label;
  const double dj = row.d[j];
  switch (set) {
    case Candidates::All:
      return true;
    case Candidates::SameLabel:
      return same;
    case Candidates::DifferentLabel:
      return !same;
    case Candidates::SemihardBand:
      return !same && row.d_partner * row.d_partner < dj * dj &&
             row.d_partner - dj + row.margin > 0.0;
    case Candidates::SoftNegatives:
      return !same && dj * dj < row.farthest_same * row.farthest_same;
    case Candidates::SoftPositives:
      return same && dj * dj > row.nearest_other * row.nearest_other;
  }
  return false;
}

// How many items of the row are in `set` (the same on every lane).
__device__ inline int count_candidates(const AnchorRow& row, Candidates set) {
  const int lane = threadIdx.x % kWarpSize;
  int count = 0;
  for (int j0 = 0; j0 < row.B; j0 += kWarpSize) {
    const int j = j0 + lane;
    count += __popc(__ballot_sync(kFullWarpMask, j < row.B && is_candidate(row, set, j)));
  }
  return count;
}

// The rank-th (0-based) item of `set` in ascending index order.
__device__ inline int kth_candidate(const AnchorRow& row, Candidates set, int rank) {
  const int lane = threadIdx.x % kWarpSize;
  for (int j0 = 0; j0 < row.B; j0 += kWarpSize) {
    const int j = j0 + lane;
    unsigned mask = __ballot_sync(kFullWarpMask, j < row.B && is_candidate(row, set, j));
    const int here = __popc(mask);
    if (rank < here) {
      for (int skip = 0; skip < rank; ++skip) mask &= mask - 1;  // drop the lowest set bits
      return j0 + __ffs(mask) - 1;
    }
    rank -= here;
  }
  return -1;  // unreachable for rank < count
}

// candidates[floor(u n)] over the n = count members of `set`.
__device__ inline int pick_uniform(const AnchorRow& row, Candidates set, int count, double u) {
  int rank = static_cast<int>(u * static_cast<double>(count));
  if (rank >= count) rank = count - 1;
  return kth_candidate(row, set, rank);
}

__device__ inline int random_negative(const AnchorRow& row, double u) {
  const int negatives = count_candidates(row, Candidates::DifferentLabel);
  if (negatives > 0) return pick_uniform(row, Candidates::DifferentLabel, negatives, u);
  return pick_uniform(row, Candidates::All, row.B, u);
}

__device__ inline int semihard_negative(const AnchorRow& row, double u) {
  const int band = count_candidates(row, Candidates::SemihardBand);
  if (band > 0) return pick_uniform(row, Candidates::SemihardBand, band, u);
  return random_negative(row, u);
}

__device__ inline void softhard_pair(AnchorRow& row, int partner, double u_negative,
                                     double u_positive, int& positive, int& negative) {
  const int negatives = count_candidates(row, Candidates::DifferentLabel);
  if (negatives == 0) {
    negative = pick_uniform(row, Candidates::All, row.B, u_negative);
    positive = partner;
    return;
  }
  const int lane = threadIdx.x % kWarpSize;
  double farthest_same = -INFINITY, nearest_other = INFINITY;
  for (int j = lane; j < row.B; j += kWarpSize) {
    const double dj = row.d[j];
    if (row.labels[j] == row.label) {
      farthest_same = fmax(farthest_same, dj);
    } else {
      nearest_other = fmin(nearest_other, dj);
    }
  }
  row.farthest_same = warp_reduce(farthest_same, MaxOp{});
  row.nearest_other = warp_reduce(nearest_other, MinOp{});
  const int soft_negatives = count_candidates(row, Candidates::SoftNegatives);
  negative = soft_negatives > 0
                 ? pick_uniform(row, Candidates::SoftNegatives, soft_negatives, u_negative)
                 : pick_uniform(row, Candidates::DifferentLabel, negatives, u_negative);
  const int soft_positives = count_candidates(row, Candidates::SoftPositives);
  if (soft_positives > 0) {
    positive = pick_uniform(row, Candidates::SoftPositives, soft_positives, u_positive);
  } else {
    positive = pick_uniform(row, Candidates::SameLabel,
                            count_candidates(row, Candidates::SameLabel), u_positive);
  }
}

// robrank's log q(d)^-1 for a different-label item, 0 for a same-label one.
__device__ inline double distance_log_weight(const AnchorRow& row, int j, double dim) {
  if (row.labels[j] == row.label) return 0.0;
  const double d = row.d[j];
  return (2.0 - dim) * log(d) - ((dim - 3.0) / 2.0) * log(1.0 - 0.25 * d * d);
}

// exp(w - max) for a different-label item (NaN -> 0), 0 for a same-label one or j >= B.
__device__ inline double distance_weight(const AnchorRow& row, int j, double dim,
                                         double max_log_weight) {
  if (j >= row.B || row.labels[j] == row.label) return 0.0;
  const double w = exp(distance_log_weight(row, j, dim) - max_log_weight);
  return isnan(w) ? 0.0 : w;
}

__device__ inline int distance_weighted_negative(const AnchorRow& row, int64_t dim_count,
                                                 double u) {
  const int lane = threadIdx.x % kWarpSize;
  const double dim = static_cast<double>(dim_count);
  double max_log_weight = -INFINITY;
  bool any_nan = false;
  for (int j = lane; j < row.B; j += kWarpSize) {
    const double w = distance_log_weight(row, j, dim);
    if (isnan(w)) {
      any_nan = true;
    } else if (w > max_log_weight) {
      max_log_weight = w;
    }
  }
  max_log_weight = warp_reduce(max_log_weight, MaxOp{});
  if (__any_sync(kFullWarpMask, any_nan)) max_log_weight = NAN;  // torch's max propagates NaN

  double total = 0.0;
  for (int j = lane; j < row.B; j += kWarpSize)
    total += distance_weight(row, j, dim, max_log_weight);
  total = warp_sum(total);
  if (!(total > 0.0)) return pick_uniform(row, Candidates::All, row.B, u);

  // Inverse CDF: the first j whose running sum of weights passes u * total.
  const double target = u * total;
  double base = 0.0;
  int last_positive = -1;
  for (int j0 = 0; j0 < row.B; j0 += kWarpSize) {
    const double w = distance_weight(row, j0 + lane, dim, max_log_weight);
    double running = w;  // inclusive scan over the lanes
    for (int offset = 1; offset < kWarpSize; offset <<= 1) {
      const double below = __shfl_up_sync(kFullWarpMask, running, offset);
      if (lane >= offset) running += below;
    }
    const unsigned passed = __ballot_sync(kFullWarpMask, w > 0.0 && base + running > target);
    if (passed != 0) return j0 + __ffs(passed) - 1;
    const unsigned positive = __ballot_sync(kFullWarpMask, w > 0.0);
    if (positive != 0) last_positive = j0 + (kWarpSize - 1 - __clz(positive));
    base += __shfl_sync(kFullWarpMask, running, kWarpSize - 1);
  }
  return last_positive;  // u * total rounded up to the full sum
}

__device__ inline int hardest_negative(const AnchorRow& row, double u) {
  const int lane = threadIdx.x % kWarpSize;
  double best_d = INFINITY;
  int best_j = row.B, first_zero = row.B;  // row.B: none
  for (int j = lane; j < row.B; j += kWarpSize) {
    if (row.labels[j] == row.label) continue;
    const double dj = row.d[j];
    if (dj == 0.0) {
      first_zero = min(first_zero, j);
    } else if (dj < best_d || (dj == best_d && j < best_j)) {
      best_d = dj;
      best_j = j;
    }
  }
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {  // argmin of (d, j)
    const double other_d = __shfl_xor_sync(kFullWarpMask, best_d, offset);
    const int other_j = __shfl_xor_sync(kFullWarpMask, best_j, offset);
    if (other_d < best_d || (other_d == best_d && other_j < best_j)) {
      best_d = other_d;
      best_j = other_j;
    }
    first_zero = min(first_zero, __shfl_xor_sync(kFullWarpMask, first_zero, offset));
  }
  if (best_j < row.B) return best_j;
  if (first_zero < row.B) return first_zero;
  return pick_uniform(row, Candidates::All, row.B, u);
}

}  // namespace engine::kernels::triplet_mining
