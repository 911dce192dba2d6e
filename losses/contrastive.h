// Contrastive loss on SPC-2 triplets, as robrank's pcontrast{N,E,C} (robrank
// losses/contrastive.py). Margin m = 1.0 for every metric.
//
//   N, E:  L = (1/T) sum_t d(a_t, p_t)  +  mean over {t : m - d(a_t, n_t) > 0} of (m - d(a_t, n_t))
//          (d = row_distance, ||a - b + 1e-6||, on normalized rows for N; the second mean is 0 when
//          no negative is inside the margin, robrank's NaN -> 0)
//   C:     PyTorch's cosine_embedding_loss for both pairs, targets +1 and -1:
//          L = (1/T) sum_t (1 - cos(a_t, p_t))  +  (1/T) sum_t max(0, cos(a_t, n_t) - m)
//          With m = 1.0 the second term is always 0 (robrank's quirk, kept).
// Each triplet contributes its (a, p) pair as a positive pair and its (a, n) pair as a negative
// pair; the miner decides which n (robrank: random by default, distance-weighted for pdcontrastN).
#pragma once

#include "engine/random.h"
#include "engine/tensor.h"
#include "losses/distance.h"
#include "losses/miners.h"

namespace losses {

constexpr double kContrastiveMargin = 1.0;

engine::Tensor contrastive_loss(const engine::Tensor& embeddings, const Triplets& triplets,
                                Metric metric, double margin = kContrastiveMargin);

// Mine on the SPC-2 batch (semihard's band = the margin, as robrank passes it), then the loss.
engine::Tensor spc2_contrastive_loss(const engine::Tensor& embeddings, const engine::Tensor& labels,
                                     Miner miner, Metric metric, engine::Generator& gen);

}  // namespace losses
