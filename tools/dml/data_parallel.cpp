// Micro-batches and data-parallel ranks of `dml train` (header: tools/dml/data_parallel.h).
#include "tools/dml/data_parallel.h"

#include <cmath>
#include <utility>

#include "attacks/defenses/defense.h"
#include "engine/autograd.h"
#include "engine/dist/communicator.h"
#include "engine/dist/nccl_collectives.h"
#include "engine/ops.h"
#include "kernels/common/check.h"
#include "kernels/common/cuda_runtime.h"
#include "tools/dml/args.h"

namespace dml {

namespace {

// Gradients are all-reduced in buckets of at most this many floats (25 MiB, the bucket size of
// PyTorch's DistributedDataParallel): one collective per bucket instead of one per parameter.
constexpr int64_t kBucketFloats = int64_t{25} << 18;

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

// Sums `flat` (f32, contiguous) over the ranks in place: MPI on host memory, NCCL on device
// memory in a build with NCCL, else through a host copy.
void all_reduce_flat(engine::Tensor& flat) {
  if (engine::dist::world().size == 1) return;
  const size_t count = static_cast<size_t>(flat.numel());
  if (flat.device().is_cpu()) {
    engine::dist::all_reduce_sum(flat.data<float>(), count);
    flat.mark_written_in_place();
  } else if (engine::dist::built_with_nccl()) {
    engine::dist::start_nccl();
    engine::kernels::cuda_synchronize();  // the backward's kernels have written the gradients
    engine::dist::nccl_all_reduce_sum(flat.data<float>(), count, nullptr);
    flat.mark_written_in_place();
  } else {
    engine::Tensor host = flat.to(engine::Device::cpu());
    engine::dist::all_reduce_sum(host.data<float>(), count);
    flat.copy_(host);
  }
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
  if (config.mining_scope == "global") {
    throw UsageError(
        "config key 'train.mining_scope': 'global' (an all-gather of every micro-batch's "
        "embeddings and labels, PML's DistributedLossWrapper) is not built; use 'local' (each "
        "micro-batch mines within its rows, robrank's choice) with " +
        step_cut(config));
  }
  if (config.batch_norm == "synchronized") {
    throw UsageError(
        "config key 'train.batch_norm': 'synchronized' (statistics over all micro-batches) is "
        "not built; use 'per_replica' (each micro-batch's own statistics) with " +
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

GradientAverager::GradientAverager(std::vector<engine::Tensor> parameters)
    : parameters_(std::move(parameters)), sums_(parameters_.size()) {}

void GradientAverager::add() {
  engine::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    engine::Tensor& param = parameters_[i];
    const engine::Tensor grad = param.grad();
    if (!grad.defined()) continue;
    sums_[i] = sums_[i].defined() ? engine::add(sums_[i], grad) : grad.clone();
    param.reset_grad();
  }
}

void GradientAverager::finish(int64_t micro_batches) {
  const size_t n = parameters_.size();
  std::vector<int64_t> reached(n);  // micro-batches (all ranks) that gave a parameter a gradient
  for (size_t i = 0; i < n; ++i) reached[i] = sums_[i].defined() ? 1 : 0;
  engine::dist::all_reduce_sum(reached.data(), n);
  engine::NoGradGuard no_grad;
  std::vector<size_t> bucket;
  int64_t bucket_floats = 0;
  auto reduce_bucket = [&] {
    if (bucket.empty()) return;
    std::vector<engine::Tensor> flats;
    for (size_t i : bucket) flats.push_back(sums_[i].reshape({-1}));
    engine::Tensor flat = engine::concat(flats, 0);
    all_reduce_flat(flat);
    flat = engine::mul_scalar(flat, 1.0 / static_cast<double>(micro_batches));
    int64_t at = 0;
    for (size_t i : bucket) {
      const int64_t count = parameters_[i].numel();
      parameters_[i].set_grad(flat.slice(0, at, at + count).reshape(parameters_[i].shape()));
      at += count;
    }
    bucket.clear();
    bucket_floats = 0;
  };
  for (size_t i = 0; i < n; ++i) {
    if (reached[i] == 0) continue;
    const engine::Tensor& param = parameters_[i];
    ENGINE_CHECK(param.dtype() == engine::DType::F32, "gradient averaging: parameter ", i, " is ",
                 engine::dtype_name(param.dtype()), ", not f32");
    if (!sums_[i].defined())
      sums_[i] = engine::Tensor::zeros(param.shape(), param.dtype(), param.device());
    bucket.push_back(i);
    bucket_floats += param.numel();
    if (bucket_floats >= kBucketFloats) reduce_bucket();
  }
  reduce_bucket();
  sums_.assign(n, engine::Tensor());
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

}  // namespace dml
