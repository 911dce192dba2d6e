// N-pair loss (Sohn, NeurIPS'16) as robrank's pnpair{N,E,C} (robrank
// losses/npair.py), on an SPC-2 batch.
//
// x = the embeddings normalized for N and C (raw for E). For every anchor row 2i, with its
// partner p = x_{2i+1}, the anchor re-normalized a^ = x_{2i} / |x_{2i}| (robrank's "norm trick",
// for every metric) and N_i the different-label rows:
//   l_i = log(1 + sum_{n in N_i} exp(<a^, x_n - p>))
//   L   = mean_i l_i + 5e-3 * mean_b |x_b|
// An anchor without different-label rows has l_i = log 1 = 0 (robrank instead draws one random
// row as its negative set).
#pragma once

#include "engine/tensor.h"
#include "losses/distance.h"

namespace losses {

constexpr double kNpairNormWeight = 5e-3;

engine::Tensor npair_loss(const engine::Tensor& embeddings, const engine::Tensor& labels,
                          Metric metric, double norm_weight = kNpairNormWeight);

}  // namespace losses
