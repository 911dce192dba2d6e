// train.mining_scope "global": a micro-batch's triplets are mined over the whole step's batch, as
// pytorch-metric-learning's DistributedLossWrapper (docs/distributed.md, "Global mining").
//
// Every rank has the whole global batch's images and labels (data_parallel.h: one sampler), but
// only its own micro-batches' embeddings. A step then goes:
//   1. each rank embeds its micro-batches (train mode, each with its own batch-norm statistics);
//   2. the embeddings of all G micro-batches are all-gathered, detached, in the batch's order
//      (rank r's micro-batches r*M .. r*M+M-1 are contiguous rows): the step's embeddings E;
//   3. every rank mines every anchor of E (mine_triplets on the whole batch, its draws from
//      micro-batch 0's stream), so all ranks take the same triplets, whatever the world size;
//   4. for each of its micro-batches g, a rank evaluates the step's loss L (the mean over all
//      triplets) on E with g's rows replaced by g's live embeddings, and back-propagates G x L:
//      only g's rows carry gradient (the other rows are constants here; their own rank or
//      micro-batch gives them theirs).
// The gradient of L with respect to the rows of g is then dL/dE_g; summed over all g (the
// all-reduce) and multiplied by 1/G (GradientAverager), the factor G cancels and the step's
// gradient is sum_g dL/dE_g = dL/dE, the gradient of the one loss over the whole batch that a
// single process computes. PML's default (efficient = False) does the same (the loss on all
// gathered rows, the local ones carrying gradient, times the world size against DDP's mean);
// its efficient = True mines only the local anchors, which drops the terms in which a local row
// is another rank's anchor's positive or negative. robrank's DDP mines within each replica
// (mining_scope "local").
#pragma once

#include <string>
#include <vector>

#include "engine/tensor.h"
#include "tools/dml/config.h"

namespace dml {

// UsageError, naming the config key, when mining_scope "global" cannot run with `config` over
// more than one micro-batch (step_cut says how the step is cut): the loss must mine triplets
// (triplet or contrastive; the others mine nothing or, as margin, inside their own loss), and the
// defense must be none, EST or SES (their attack mines nothing; EST trains on the configured loss
// of the adversarial embeddings, SES on that of the clean ones plus a per-row embedding shift, so
// each micro-batch's x~ (and shifts) are made locally and the loss mined over the step); the
// others' refusal says why (docs/distributed.md, "Global mining").
void check_global_mining(const TrainConfig& config, const std::string& step_cut);

// The step's embeddings E, detached, on the device of `local`: every micro-batch's rows of every
// rank in the batch's order, given this rank's micro-batches' embeddings in order (an MPI
// all-gather of their bytes, exact; in one process the rows concatenated). SES's per-row shifts
// ([rows, 1]) are gathered the same way.
engine::Tensor gather_step_embeddings(const std::vector<engine::Tensor>& local);

// E with rows [first_row, first_row + live.size(0)) replaced by `live`: the only rows of the
// result that carry gradient.
engine::Tensor with_live_rows(const engine::Tensor& step_embeddings, const engine::Tensor& live,
                              int64_t first_row);

}  // namespace dml
