// The triplet miners for SPC-2 batches, with robrank's semantics (robrank
// robrank/losses/miner.py), on the host over a B x B mining distance matrix: the one CPU
// definition of the rules, used by losses::mine_triplets (losses/miners.h, which computes the
// matrix from a tensor) and by the fused triplet loss's CPU twin (triplet.h). The CUDA kernels
// apply the same rules warp by warp (triplet_mining.cuh).
//
// Input: the mining distances d [B, B] of an SPC-2 batch of B = 2P embeddings [a0, p0, a1, p1, ...]
// (zero diagonal, never NaN for finite input) and its labels. Output: P triplets; triplet i always
// has anchor 2i. "Different-label" below means labels[j] != labels[2i]; the anchor itself is a
// same-label item at distance 0. Every random choice is uniform: anchor i uses the uniforms
// u0 = draws[2i] and u1 = draws[2i + 1] (in [0, 1)), and a uniform pick among n candidates in
// ascending index order takes candidate floor(u n).
//
//   Random    positive = partner 2i+1; negative uniform over different-label items (none in the
//             batch: uniform over all B items).
//   Semihard  (FaceNet) positive = partner; negative uniform over different-label n with
//             d(a,p)^2 < d(a,n)^2 and d(a,p) - d(a,n) + margin > 0, i.e. inside the margin band
//             d(a,p) < d(a,n) < d(a,p) + margin; fallback uniform over different-label items,
//             then over all items.
//   Softhard  (Roth et al. ICML'20) both re-sampled. Negative (u0) uniform over different-label n
//             with d(a,n)^2 < (max over same-label j of d(a,j))^2, fallback uniform over
//             different-label items (none: uniform over all items). Positive (u1) uniform over
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
// Every call uses exactly 2P uniforms whatever the data (a fixed stream layout: the same uniforms
// in, the same triplets out). The hardness H = d(a,p) - d(a,n) of each pick comes from the same
// mining distances, as the Hardness Manipulation defenses need it.
// Cost: O(P B) comparisons (a short scan of each anchor's row), O(B) scratch per anchor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace engine::kernels {

enum class Miner { Random, Semihard, Softhard, Distance, Hardest };

// Full names ("random", "semihard", "softhard", "distance", "hardest") or robrank's sampler
// letters ("r", "m", "s", "d", "h"); anything else throws engine::Error naming the string.
Miner parse_miner(const std::string& name);
// The same names, for a caller that tells a miner from other names: nullopt where parse_miner
// throws.
std::optional<Miner> find_miner(const std::string& name);
const char* miner_name(Miner miner);
// The five names parse_miner reads, in the enum's order (for config validation messages).
const std::vector<std::string>& miner_names();

// Uniforms every anchor takes from the stream, whatever the rule uses (softhard needs two).
constexpr int64_t kMiningDrawsPerAnchor = 2;

// Layout: dist [B, B] row-major; labels [B] (labels[2i] == labels[2i + 1], checked by the
// callers); draws [B] = [P * kMiningDrawsPerAnchor]; anchor, positive, negative and hardness [P].
// dim is the embedding dimension D of the distance-weighted rule; margin is semihard's band width
// (the other rules ignore it).
void mine_triplets_cpu(const double* dist, const int64_t* labels, int64_t B, int64_t dim,
                       Miner miner, double margin, const double* draws, int64_t* anchor,
                       int64_t* positive, int64_t* negative, double* hardness);

}  // namespace engine::kernels
