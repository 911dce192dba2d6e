// Triplet loss (robrank losses/triplet.py; docs/config.md, Losses):
//
//   L = (1/T) sum_t max(0, d(a_t, p_t) - d(a_t, n_t) + margin)
//
// with d = row_distance (distance.h) on the embeddings as the metric sees them (rows
// L2-normalized for N and C): ||a - p + 1e-6|| for N and E (PyTorch's triplet_margin_loss, which
// robrank calls), 1 - cos for C. Margins: default_margin(metric) = 0.2 for N and C, 1.0 for E.
// A composition of engine ops, so autograd provides the backward; the hinge's gradient is 0 for
// triplets that satisfy the margin. At exactly 0 it is 0 too (relu's convention), where PyTorch's
// triplet_margin_loss, a clamp_min(., 0), passes the gradient (clamp_min's backward keeps
// x >= min): a float tie that decides nothing in practice.
#pragma once

#include "engine/random.h"
#include "engine/tensor.h"
#include "losses/distance.h"
#include "losses/miners.h"

namespace losses {

// On gathered rows a, p, n [T, D] (robrank's `raw`, used by the defenses on clean and
// adversarial embeddings). Normalizes for N and C itself (idempotent on unit rows).
engine::Tensor triplet_loss_rows(const engine::Tensor& anchors, const engine::Tensor& positives,
                                 const engine::Tensor& negatives, Metric metric, double margin);

// On index triplets into a batch of embeddings [B, D]: anchor, positive, negative I64 [T].
engine::Tensor triplet_loss(const engine::Tensor& embeddings, const engine::Tensor& anchor,
                            const engine::Tensor& positive, const engine::Tensor& negative,
                            Metric metric, double margin);
engine::Tensor triplet_loss(const engine::Tensor& embeddings, const Triplets& triplets,
                            Metric metric, double margin);

// robrank's p<miner>triplet<metric> losses on an SPC-2 batch: mine with `miner` (semihard's band
// = the loss margin), then triplet_loss with margin default_margin(metric).
engine::Tensor spc2_triplet_loss(const engine::Tensor& embeddings, const engine::Tensor& labels,
                                 Miner miner, Metric metric, engine::Generator& gen);

// Per-triplet hardness H_t = d(a_t, p_t) - d(a_t, n_t) [T] on gathered rows (normalized for N and
// C inside), differentiable: the source hardness of Hardness Manipulation.
engine::Tensor triplet_hardness(const engine::Tensor& anchors, const engine::Tensor& positives,
                                const engine::Tensor& negatives, Metric metric);

}  // namespace losses
