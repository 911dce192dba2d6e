// Micro-batches and data-parallel ranks of `dml train` (header: tools/dml/data_parallel.h).
#include "tools/dml/data_parallel.h"

#include <cmath>
#include <utility>

#include "attacks/defenses/defense.h"
#include "engine/autograd.h"
#include "engine/dist/communicator.h"
#include "engine/ops.h"
#include "kernels/common/check.h"
#include "tools/dml/args.h"
#include "tools/dml/global_mining.h"

namespace dml {

namespace {

std::string step_cut(const TrainConfig& config) {
  const int ranks = engine::dist::world().size;
  return "train.micro_batches " + std::to_string(config.micro_batches) + " x " +
         std::to_string(ranks) + (ranks == 1 ? " rank" : " MPI ranks") + " = " +
         std::to_string(micro_batches_per_step(config)) + " micro-batches per step";
}

// Whether HM's H_D reads its previous step's adversarial loss (defense.h, HmDestination).
bool hm_reads_previous_loss(const attacks::defenses::DefenseOptions& defense) {
  using attacks::defenses::HmDestination;
  if (defense.recipe != attacks::defenses::Recipe::Hm) return false;
  const HmDestination d = defense.hm.destination;
  return d == HmDestination::GB || d == HmDestination::GLga || d == HmDestination::G2 ||
         d == HmDestination::GSqrt;
}

}  // namespace

int64_t micro_batches_per_step(const TrainConfig& config) {
  return config.micro_batches * engine::dist::world().size;
}

void check_micro_batches(const TrainConfig& config) {
  const int64_t g = micro_batches_per_step(config);
  if (g == 1) return;
  if (config.sampler_name != "spc2") {
    throw UsageError("config key 'sampler.name': " + config.sampler_name +
                     " batches are not cut into micro-batches (" + step_cut(config) +
                     "); use spc2, or train.micro_batches 1 in one process");
  }
  if (config.pairs_per_batch % g != 0) {
    throw UsageError("config key 'sampler.pairs_per_batch' (" +
                     std::to_string(config.pairs_per_batch) +
                     " pairs, the global batch) does not divide by the " + step_cut(config));
  }
  if (config.mining_scope == "global") check_global_mining(config, step_cut(config));
  if (config.batch_norm == "synchronized" && config.micro_batches > 1) {
    throw UsageError(
        "config key 'train.batch_norm': 'synchronized' sums the statistics over the ranks, but a "
        "rank's micro-batches run one after another and cannot share them; use "
        "train.micro_batches 1 (one micro-batch per rank) or 'per_replica' with " +
        step_cut(config));
  }
  if (hm_reads_previous_loss(config.defense)) {
    throw UsageError("config key 'defense.hm.destination' (" +
                     attacks::defenses::hm_destination_name(config.defense.hm) +
                     ") reads the previous step's adversarial loss, which would be one "
                     "micro-batch's with " +
                     step_cut(config) + "; use a miner destination or one micro-batch");
  }
}

RowRange micro_batch_rows(int64_t batch_images, int64_t g, int64_t micro_batches) {
  ENGINE_CHECK(batch_images % 2 == 0, "micro-batches: an SPC-2 batch of ", batch_images,
               " images is not whole pairs");
  const engine::dist::Share pairs = engine::dist::share_of(batch_images / 2, static_cast<int>(g),
                                                           static_cast<int>(micro_batches));
  ENGINE_CHECK(pairs.end > pairs.begin, "micro-batches: a batch of ", batch_images / 2,
               " pairs has fewer pairs than its ", micro_batches,
               " micro-batches (the epoch's last batch: set sampler.drop_last true)");
  return RowRange{2 * pairs.begin, 2 * pairs.end};
}

RowRange rank_rows(int64_t batch_images, int64_t rank, int64_t micro_batches_per_rank,
                   int64_t ranks) {
  const int64_t total = micro_batches_per_rank * ranks;
  const int64_t first = rank * micro_batches_per_rank;
  return RowRange{micro_batch_rows(batch_images, first, total).begin,
                  micro_batch_rows(batch_images, first + micro_batches_per_rank - 1, total).end};
}

engine::Generator micro_batch_generator(const engine::Generator& mining, int64_t g) {
  engine::Generator gen(mining.seed);
  gen.offset = mining.offset + static_cast<uint64_t>(g) * kMicroBatchBlocks;
  return gen;
}

void check_micro_batch_draws(const engine::Generator& used, const engine::Generator& mining,
                             int64_t g) {
  const uint64_t first = micro_batch_generator(mining, g).offset;
  ENGINE_CHECK(used.offset - first <= kMicroBatchBlocks, "micro-batch ", g, " drew ",
               used.offset - first, " random blocks, more than its range of ", kMicroBatchBlocks);
}

void sum_over_ranks(std::vector<double>& values) {
  engine::dist::all_reduce_sum(values.data(), values.size());
}

std::vector<double> mean_over_micro_batches(std::vector<double> local_sums, int64_t micro_batches) {
  engine::dist::all_reduce_sum(local_sums.data(), local_sums.size());
  for (double& value : local_sums) value /= static_cast<double>(micro_batches);
  return local_sums;
}

int64_t mean_count_over_micro_batches(int64_t local_sum, int64_t micro_batches) {
  engine::dist::all_reduce_sum(&local_sum, 1);
  return (local_sum + micro_batches / 2) / micro_batches;
}

std::vector<engine::Tensor> copy_buffers(const engine::nn::Module& module) {
  engine::NoGradGuard no_grad;
  std::vector<engine::Tensor> copies;
  for (const auto& [name, buffer] : module.named_buffers()) copies.push_back(buffer.clone());
  return copies;
}

void restore_buffers(const engine::nn::Module& module, const std::vector<engine::Tensor>& copies) {
  engine::NoGradGuard no_grad;
  const auto buffers = module.named_buffers();
  ENGINE_CHECK(buffers.size() == copies.size(), "restore_buffers: ", copies.size(), " copies of ",
               buffers.size(), " buffers");
  for (size_t i = 0; i < buffers.size(); ++i) {
    engine::Tensor buffer = buffers[i].second;
    buffer.copy_(copies[i]);
  }
}

void broadcast_buffers_from_rank_0(const engine::nn::Module& module) {
  if (engine::dist::world().size == 1) return;
  engine::NoGradGuard no_grad;
  for (const auto& [name, buffer] : module.named_buffers()) {
    engine::Tensor host = buffer.to(engine::Device::cpu()).clone();
    engine::dist::broadcast(
        host.raw_data(), static_cast<size_t>(host.numel()) * engine::dtype_size(host.dtype()), 0);
    engine::Tensor target = buffer;
    target.copy_(host);
  }
}

std::vector<engine::Tensor> averaged_parameters(const engine::optim::Optimizer& optimizer,
                                                const engine::optim::Optimizer* loss_optimizer) {
  std::vector<engine::Tensor> averaged = optimizer.params();
  if (loss_optimizer) {
    for (const engine::Tensor& p : loss_optimizer->params()) averaged.push_back(p);
  }
  return averaged;
}

}  // namespace dml
