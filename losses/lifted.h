// Generalized lifted-structure loss (Hermans et al.'s generalization of Oh Song et al.) as
// robrank's pglift{N,E,C} (robrank losses/lifted.py), on an SPC-2 batch.
//
// For every anchor a = row 2i, with P_a = same-label rows other than a itself and N_a the
// different-label rows (x normalized for N and C):
//   l_a = max(0, log sum_{p in P_a} exp d(a, p) + log sum_{n in N_a} exp(m - d(a, n)))
//   L   = mean_a l_a + 5e-3 * mean_b |x_b|
// m = default_margin(metric) (0.2 for N and C, 1.0 for E); d = distance_matrix (exact
// differences; robrank's per-row pairwise_distance adds 1e-6 to each difference, a shift of at
// most 1e-6 sqrt(D)). An anchor without any different-label row has log sum over nothing =
// -inf, so l_a = 0 (robrank instead draws one random row as its negative set).
#pragma once

#include "engine/tensor.h"
#include "losses/distance.h"

namespace losses {

constexpr double kLiftedNormWeight = 5e-3;

engine::Tensor lifted_loss(const engine::Tensor& embeddings, const engine::Tensor& labels,
                           Metric metric, double margin, double norm_weight = kLiftedNormWeight);
// margin = default_margin(metric).
engine::Tensor lifted_loss(const engine::Tensor& embeddings, const engine::Tensor& labels,
                           Metric metric);

}  // namespace losses
