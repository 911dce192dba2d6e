// Triplet miners for SPC-2 batches, with robrank's semantics (research/robrank-spec.md §3,
// robrank/losses/miner.py).
//
// Input: an SPC-2 batch of B = 2P embeddings [a0, p0, a1, p1, ...] (distance.h) and its labels.
// Output: P triplets; triplet i always has anchor 2i. The mining distance matrix d is computed
// without gradient on the detached embeddings as the metric sees them (mining_distances: a zero
// diagonal, exact for N and E and within 1e-15 for C, never NaN). "Different-label" below means
// labels[j] != labels[2i]; the anchor itself is a same-label item at distance 0. Every random
// choice is uniform and draws from the Generator.
//
//   Random    positive = partner 2i+1; negative uniform over different-label items (none in the
//             batch: uniform over all B items).
//   Semihard  (FaceNet) positive = partner; negative uniform over different-label n with
//             d(a,p)^2 < d(a,n)^2 and d(a,p) - d(a,n) + margin > 0, i.e. inside the margin band
//             d(a,p) < d(a,n) < d(a,p) + margin; fallback uniform over different-label items,
//             then over all items.
//   Softhard  (Roth et al. ICML'20) both re-sampled. Negative uniform over different-label n with
//             d(a,n)^2 < (max over same-label j of d(a,j))^2, fallback uniform over
//             different-label items (none: uniform over all items). Positive uniform over
//             same-label p (the anchor included) with d(a,p)^2 > (min over different-label k of
//             d(a,k))^2, fallback uniform over all same-label items — so the anchor itself can be
//             the positive, as in robrank; with no different-label item the partner.
//   Distance  (Wu et al.) positive = partner; negative drawn with probability proportional to
//             q(d)^-1 = exp(w), w = (2 - D) log d - ((D - 3)/2) log(1 - d^2/4), D = embedding dim,
//             exactly robrank's arithmetic: same-label entries get w = 0 before the max is taken
//             and weight 0 after exp(w - max); NaN weights (d >= 2, or a NaN max) become 0; if all
//             weights are 0, uniform over all B items (same-label ones included). No 0.5 lower
//             cutoff, unlike the paper, so with D = 512 it behaves almost like Hardest.
//   Hardest   positive = partner; negative = the different-label item with the smallest nonzero
//             distance (robrank masks same-label entries to 0 and skips zeros), the first on ties;
//             fallbacks where robrank would crash: all different-label items at distance 0 ->
//             the first of them; no different-label item -> uniform over all items.
//
// Every call draws exactly 2P uniforms from `gen` whatever the data (a fixed stream layout:
// (seed, offset) in, the same triplets out). The hardness H = d(a,p) - d(a,n) of each pick is
// returned from the same mining distances, as the Hardness Manipulation defenses need it.
#pragma once

#include <cstdint>
#include <string>

#include "engine/random.h"
#include "engine/tensor.h"
#include "losses/distance.h"

namespace losses {

enum class Miner { Random, Semihard, Softhard, Distance, Hardest };

// Full names ("random", "semihard", "softhard", "distance", "hardest") or robrank's sampler
// letters ("r", "m", "s", "d", "h"); anything else throws naming the string.
Miner parse_miner(const std::string& name);
const char* miner_name(Miner miner);

// P index triplets into a batch (I64 on the embeddings' device) and the hardness of each
// (embeddings' dtype and device).
struct Triplets {
  engine::Tensor anchor;
  engine::Tensor positive;
  engine::Tensor negative;
  engine::Tensor hardness;  // d(a,p) - d(a,n) under the mining metric
  int64_t size() const { return anchor.defined() ? anchor.numel() : 0; }
};

// `margin` is semihard's band width (robrank passes the loss's margin: 0.2 for N and C, 1.0 for E;
// ACT and REST pass 1.0 for N); the other miners ignore it.
Triplets mine_triplets(const engine::Tensor& embeddings, const engine::Tensor& labels, Miner miner,
                       Metric metric, engine::Generator& gen, double margin);
// The same with margin = default_margin(metric).
Triplets mine_triplets(const engine::Tensor& embeddings, const engine::Tensor& labels, Miner miner,
                       Metric metric, engine::Generator& gen);

}  // namespace losses
