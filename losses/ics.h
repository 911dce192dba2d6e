// Intra-Class Structure term of Zhou & Patel, CVPR'22 (HM §3.3, eq. "L_ICS"):
//
//   L_ICS = lambda * L_T(a, phi(A + r_a), p; 0)
//         = lambda * (1/T) sum_t max(0, d(a_t, a~_t) - d(a_t, p_t))
//
// the triplet loss with margin 0 whose "anchor" is the clean anchor embedding a, "positive" its
// adversarial counterpart a~ = phi(A + r_a) (the HM adversarial anchor), and "negative" the clean
// positive p: it pulls the adversarial anchor closer to the clean anchor than the clean positive
// is, enforcing structure within the class. lambda = 0.5 by default (0.05 on SOP). robrank
// (robrank defenses/amd.py) computes it with metric N (the normalized embeddings and the same
// triplet-margin loss as triplet.h); other metrics are accepted for completeness.
// `margin` replaces the 0 of L_T: the HM supplement's Table 10 tries 0.2 (worse R@1, marginal
// robustness), so the paper's term is margin 0, the default.
// Differentiable in all three inputs (in training a~ comes from the adversarial forward, a and p
// from a clean forward with gradient).
#pragma once

#include "engine/tensor.h"
#include "losses/distance.h"

namespace losses {

constexpr double kIcsDefaultLambda = 0.5;

// All three [T, D], row t of each belonging to triplet t.
engine::Tensor ics_loss(const engine::Tensor& clean_anchors,
                        const engine::Tensor& adversarial_anchors,
                        const engine::Tensor& clean_positives, Metric metric = Metric::N,
                        double lambda = kIcsDefaultLambda, double margin = 0.0);

}  // namespace losses
