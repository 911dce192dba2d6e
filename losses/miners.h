// Triplet mining on tensors: the B x B mining distance matrix of an SPC-2 batch, then the miners
// of kernels/triplet/triplet_mining.h (the rules, with robrank's semantics) on it, drawing their
// uniforms from a Generator.
//
// Input: an SPC-2 batch of B = 2P embeddings [a0, p0, a1, p1, ...] (distance.h) and its labels.
// Output: P triplets; triplet i always has anchor 2i. The mining distance matrix d is computed
// without gradient on the detached embeddings as the metric sees them (mining_distances: a zero
// diagonal, exact for N and E and within 1e-15 for C, never NaN).
//
// Every call draws exactly 2P uniforms from `gen` whatever the data (a fixed stream layout:
// (seed, offset) in, the same triplets out). The hardness H = d(a,p) - d(a,n) of each pick is
// returned from the same mining distances, as the Hardness Manipulation defenses need it.
#pragma once

#include <cstdint>

#include "engine/random.h"
#include "engine/tensor.h"
#include "kernels/triplet/triplet_mining.h"
#include "losses/distance.h"

namespace losses {

// The miners and their names are the kernels' (kernels/triplet/triplet_mining.h).
using engine::kernels::find_miner;
using engine::kernels::Miner;
using engine::kernels::miner_name;
using engine::kernels::miner_names;
using engine::kernels::parse_miner;

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
