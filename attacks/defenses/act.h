// ACT (the recipe: act.cpp): its training loss, exposed for tests.
#pragma once

#include "attacks/defenses/defense.h"
#include "engine/tensor.h"
#include "losses/distance.h"

namespace attacks::defenses {

// ACT's triplet loss on rows: anchors [T, D] as the model gave them, adversarial positives and
// negatives [T, D] likewise. Normalized: losses::triplet_loss_rows (every row normalized for N
// and C). Unnormalized (robrank before its issue #7, defense.h): f^(p~) and f^(n~) normalized as
// the metric says, the anchors not; for N,
//   mean_i relu(||a_i - f^(p~_i) + 1e-6|| - ||a_i - f^(n~_i) + 1e-6|| + margin)
// (PyTorch's triplet_margin_loss, whose pairwise distance adds 1e-6), for C and E the same as
// Normalized.
engine::Tensor act_triplet_loss(const engine::Tensor& anchors, const engine::Tensor& positives,
                                const engine::Tensor& negatives, losses::Metric metric,
                                double margin, ActAnchor anchor);

}  // namespace attacks::defenses
