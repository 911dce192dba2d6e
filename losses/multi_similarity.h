// Multi-similarity loss (Wang et al., CVPR'19) as MDProp trains with it (MDProp §C.1.1; the
// "Revisiting DML" criterion that MDProp's S2SD code base uses), with mining that filters.
//
// On cosine similarities S_ij = <x_i/|x_i|, x_j/|x_j|>, for every anchor i of the batch:
//   P_i = {j != i : y_j = y_i}   (the anchor itself is not its own positive)
//   N_i = {k : y_k != y_i}
//   kept positives  P~_i = {j in P_i : S_ij - eps < max_{k in N_i} S_ik}
//   kept negatives  N~_i = {k in N_i : S_ik + eps > min_{j in P_i} S_ij}
//   l_i = (1/alpha) log(1 + sum_{j in P~_i} exp(-alpha (S_ij - lambda)))
//       + (1/beta)  log(1 + sum_{k in N~_i} exp( beta  (S_ik - lambda)))
//   L   = mean of l_i over the anchors with P~_i and N~_i both non-empty (0 if there are none)
// alpha = 2, beta = 40, lambda = 0.5, eps = 0.1. The mining thresholds are computed from the
// similarities' values and are not differentiated (they select terms).
//
// robrank's pmsN/pmsC differ: anchors only at even rows, the anchor counted among its own
// positives, and each set compared to its own min/max so nothing is ever filtered. We keep the
// paper's filtering; `spc2_anchors` restricts the anchors to the even rows of an SPC-2 batch.
// The metric does not matter: the loss is defined on cosine similarity.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace losses {

struct MultiSimilarityOptions {
  double alpha = 2.0;    // positive weight
  double beta = 40.0;    // negative weight
  double lambda = 0.5;   // similarity threshold
  double epsilon = 0.1;  // mining margin
  bool spc2_anchors = false;
};

// Which pairs the mining kept, row-major over [anchors, B]: anchor r is batch row anchor_rows[r].
struct MultiSimilarityMining {
  std::vector<int64_t> anchor_rows;
  std::vector<uint8_t> positive;  // 1 where (anchor r, item j) is a kept positive pair
  std::vector<uint8_t> negative;  // 1 where (anchor r, item k) is a kept negative pair
  std::vector<uint8_t> used;      // per anchor: both kept sets non-empty
};

// The mining step alone (no gradient), for inspection and tests.
MultiSimilarityMining mine_multi_similarity(const engine::Tensor& embeddings,
                                            const engine::Tensor& labels,
                                            const MultiSimilarityOptions& options = {});

// embeddings [B, D] (any float dtype), labels I64 [B]. Differentiable in the embeddings.
engine::Tensor multi_similarity_loss(const engine::Tensor& embeddings, const engine::Tensor& labels,
                                     const MultiSimilarityOptions& options = {});

}  // namespace losses
