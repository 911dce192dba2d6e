// The fused SPC-2 triplet loss: mining and triplet loss in one kernel call (kernels/triplet),
// differentiable through one autograd node.
//
//   spc2_triplet_fused(x, labels, miner, metric, gen, margin)
//     == mine_triplets(x, labels, miner, metric, gen, margin) followed by
//        triplet_loss(x, triplets, metric, margin)
//
// with the same triplets, the same hardness and the same generator consumption (2P uniforms:
// ceil(2P / 4) Philox blocks), and the loss and gradient of the composition up to rounding (the
// fused path accumulates in f64). The gradient with respect to x is computed in the forward call
// and stored; the node's backward returns it times grad_output. When no gradient is recorded
// (grad mode off, or x does not require grad) none is computed.
//
// Devices: CPU tensors (f32 or f64) run the CPU twin; CUDA tensors (f32) run the CUDA kernels,
// with no host synchronization: loss, triplets and hardness stay on the device. The labels must
// be on the embeddings' device. On the CPU, labels that break the SPC-2 layout throw (as
// mine_triplets does); on the GPU they cannot be read without a synchronization, so the kernel
// makes the loss (and the gradient rows of the broken triplets) NaN instead.
// Batch: B = 2P rows, 2 <= B <= 1024 (kernels::kFusedTripletMaxBatch), D >= 1.
#pragma once

#include "engine/random.h"
#include "engine/tensor.h"
#include "losses/distance.h"
#include "losses/miners.h"

namespace losses {

struct FusedTriplet {
  engine::Tensor loss;  // scalar, the embeddings' dtype and device; differentiable
  Triplets triplets;    // anchor 2i, positive, negative (I64) and hardness, on the device
};

FusedTriplet spc2_triplet_fused(const engine::Tensor& embeddings, const engine::Tensor& labels,
                                Miner miner, Metric metric, engine::Generator& gen, double margin);

// The loss alone.
engine::Tensor spc2_triplet_loss_fused(const engine::Tensor& embeddings,
                                       const engine::Tensor& labels, Miner miner, Metric metric,
                                       engine::Generator& gen, double margin);

}  // namespace losses
