// Hardness Manipulation HM[H_S, H_D] with the Gradual Adversary and ICS (Zhou & Patel, CVPR'22:
// HM §3 and the HM supplement; robrank defenses/amd.py hm_training_step +
// MadryInnerMax.HardnessManipulate).
//
// One training step, metric m (the papers use N), margin gamma = 0.2:
//   1. e = f^(x) in eval mode, no gradient (normalized for N and C).
//   2. Source triplets S = miner(source) and, when H_D comes from a miner, destination triplets
//      D = miner(destination) on e, drawn independently from the mining stream (semihard band =
//      the loss margin). Both have anchor 2i in row i.
//   3. H_D [B]: the destination triplets' hardness d(a, p) - d(a, n) on e, or a pseudo-hardness
//      (hm_destination_hardness below) of the previous step's adversarial loss.
//   4. If the destination is the source miner, no attack (plain training on S). Otherwise PGD on
//      the 3B stacked images [A; P; N] of S (each triplet its own copies), descending
//        et: mean_i min(0, H_S~_i - H_D_i)^2      l2: mean_i (H_S~_i - H_D_i)^2
//      with H_S~ the perturbed triplets' hardness; et is zero once a triplet is at least as hard
//      as its destination, so those stop moving. Early stop when the objective changes by less
//      than stop_tolerance (1e-7) between steps.
//   5. loss = triplet(a~, p~, n~; gamma) on one train-mode forward of the 3B adversarial images;
//      its value becomes l_{t-1} for the next step (state "hm_previous_loss", initially 2.0).
//   6. ICS (optional): f(a), f(p) of the clean anchors and positives in one train-mode forward;
//      loss += lambda * triplet(a, a~, p; 0) (losses/ics.h).
// Cost: the PGD steps actually taken + 1 passes.
#pragma once

#include "attacks/defenses/defense.h"
#include "engine/tensor.h"

namespace attacks::defenses {

// Throws engine::Error naming the option for a non-positive gamma or another value out of range
// (the names were checked where they were parsed: defense.h).
void validate_hm(const HmOptions& options);

// The pseudo-hardness H_D of HM §3.2 from the previous adversarial loss (a one-element
// tensor): with l = clamp(previous_loss, 0, u) / u (u = loss_upper, or gamma when 0),
//   g_lga -gamma l,  g_2 -gamma l^2,  g_sqrt -gamma sqrt(l),  g_b miner_hardness + xi (1 - l),
//   const_0 0,  const_half_gamma -gamma/2,  const_gamma -gamma.
// miner_hardness [B] is used by g_b only (undefined otherwise). Returns [1] for the functions of
// l alone, [B] for g_b; no gradient. Throws for HmDestination::Miner (no function of l).
engine::Tensor hm_destination_hardness(const HmOptions& options,
                                       const engine::Tensor& previous_loss,
                                       const engine::Tensor& miner_hardness);

}  // namespace attacks::defenses
