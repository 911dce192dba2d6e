// One training step cut into micro-batches, in one process (train.micro_batches) and over MPI
// ranks (`mpirun -n N dml train`): docs/distributed.md, "Data-parallel training".
//
// The global batch of a step (one SPC-2 batch from the one deterministic sampler, the same on
// every rank) is cut into G = N ranks x M micro-batches of whole pairs, contiguous and in order:
// rank r takes micro-batches r*M .. r*M+M-1, and decodes only their rows (rank_rows). Each
// micro-batch is a batch of its own: the defense's attack, the triplet mining (scope "local",
// robrank's DDP) and the batch-norm statistics (per replica; train.batch_norm synchronized sums
// them over the ranks instead, engine/nn/batch_norm_sync.h) see only its rows, and its mining draws
// come from a stream of its own (micro_batch_generator), so what micro-batch g decides does not
// depend on which rank runs it. The step's gradient is the mean of the G micro-batches' gradients:
// each rank sums its own in order, the ranks' sums are all-reduced (summed) in buckets that start
// during the backward of the rank's last micro-batch, and the sum is multiplied by 1/G. With N = 2
// ranks of M = 1 and one process with M = 2 the two sums are g0 + g1 and g1 + g0, equal in IEEE
// arithmetic, so the runs are equal bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/loader.h"
#include "engine/nn/module.h"
#include "engine/optim/optimizer.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "tools/dml/config.h"
#include "tools/dml/gradient_averager.h"

namespace dml {

// G: the micro-batches of one step over all ranks (train.micro_batches x the world's size).
int64_t micro_batches_per_step(const TrainConfig& config);

// UsageError, naming the config key and the world size, when the run cannot be cut into
// micro-batches as configured: a global batch (sampler.pairs_per_batch) that G does not divide,
// the m_per_class sampler, train.mining_scope "global" where global_mining.h refuses it,
// train.batch_norm "synchronized" with train.micro_batches > 1 (a rank's micro-batches run one
// after another, so their statistics cannot be summed before each normalizes), an HM defense whose
// destination reads the previous step's adversarial loss (that state would be one micro-batch's,
// not the batch's). Passes when G is 1.
void check_micro_batches(const TrainConfig& config);

// The rows of micro-batch g (of G) of an SPC-2 batch [a0, p0, a1, p1, ...]: its share of the
// batch's pairs (engine::dist::share_of: contiguous, the first ones one pair more when the last,
// smaller batch of an epoch does not divide).
using RowRange = data::RowRange;
RowRange micro_batch_rows(int64_t batch_images, int64_t g, int64_t micro_batches);

// The rows of rank `rank`'s micro-batches (rank * M .. rank * M + M - 1 of ranks * M, M =
// micro_batches_per_rank): the only rows of each batch it decodes (TrainingRun::loader_options),
// contiguous. With 2 ranks of 1 micro-batch and a batch of 8 rows, rank 1's are rows 4..7.
RowRange rank_rows(int64_t batch_images, int64_t rank, int64_t micro_batches_per_rank,
                   int64_t ranks);

// Each micro-batch draws its mining and attack randomness from its own range of the mining
// stream: micro-batch g of a step that starts at offset O draws from offset O + g * 2^32 blocks,
// and the step ends at O + G * 2^32. The ranges depend on g only, so a rank draws what a single
// process draws for the same micro-batch; check_micro_batch_draws says when a micro-batch used
// more than its range.
constexpr uint64_t kMicroBatchBlocks = uint64_t{1} << 32;
engine::Generator micro_batch_generator(const engine::Generator& mining, int64_t g);
void check_micro_batch_draws(const engine::Generator& used, const engine::Generator& mining,
                             int64_t g);

// The gradients of one step over its micro-batches and ranks, all-reduced in buckets that overlap
// the backward: GradientAverager (tools/dml/gradient_averager.h), over these parameters: the
// model's (`optimizer`'s), then the loss's (`loss_optimizer`'s, when it has one).
std::vector<engine::Tensor> averaged_parameters(const engine::optim::Optimizer& optimizer,
                                                const engine::optim::Optimizer* loss_optimizer);

// Element-wise sum over the ranks, in place: what a synchronized batch norm
// (engine/nn/batch_norm_sync.h, train.batch_norm "synchronized") sums its statistics with.
void sum_over_ranks(std::vector<double>& values);

// The mean over all micro-batches of all ranks of per-micro-batch values (the loss, the defense's
// log values) that each rank has summed over its own micro-batches, in order.
std::vector<double> mean_over_micro_batches(std::vector<double> local_sums, int64_t micro_batches);
// The same for counts (forward/backward passes), rounded to the nearest integer.
int64_t mean_count_over_micro_batches(int64_t local_sum, int64_t micro_batches);

// Batch-norm running statistics follow micro-batch 0 alone, as PyTorch's DDP broadcasts rank 0's
// buffers: a process takes a copy of the buffers after its first micro-batch and puts it back
// after each later one, and after the step rank 0's buffers are broadcast to the other ranks.
std::vector<engine::Tensor> copy_buffers(const engine::nn::Module& module);
void restore_buffers(const engine::nn::Module& module, const std::vector<engine::Tensor>& copies);
void broadcast_buffers_from_rank_0(const engine::nn::Module& module);

}  // namespace dml
