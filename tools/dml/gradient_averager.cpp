// Gradient buckets summed over the ranks while the backward goes on (header:
// tools/dml/gradient_averager.h).
#include "tools/dml/gradient_averager.h"

#include <utility>

#include "engine/autograd.h"
#include "engine/dist/communicator.h"
#include "engine/dist/nccl_collectives.h"
#include "engine/grad_ready.h"
#include "engine/ops.h"
#include "kernels/common/check.h"
#include "kernels/common/cuda_runtime.h"

namespace dml {

namespace {

bool single_process() { return engine::dist::world().size == 1; }

}  // namespace

GradientAverager::GradientAverager(std::vector<engine::Tensor> parameters, int64_t bucket_floats)
    : parameters_(std::move(parameters)),
      sums_(parameters_.size()),
      reached_(parameters_.size(), 0),
      in_bucket_(parameters_.size(), false),
      bucket_of_(parameters_.size(), 0) {
  ENGINE_CHECK(bucket_floats > 0, "gradient buckets of ", bucket_floats, " floats");
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const engine::Tensor& param = parameters_[i];
    ENGINE_CHECK(param.dtype() == engine::DType::F32, "gradient averaging: parameter ", i, " is ",
                 engine::dtype_name(param.dtype()), ", not f32");
    index_of_.emplace(param.impl(), i);
  }
  make_buckets(bucket_floats);
}

// Reverse parameter order; a bucket closes with the parameter that brings it to bucket_floats.
void GradientAverager::make_buckets(int64_t bucket_floats) {
  Bucket bucket;
  for (size_t i = parameters_.size(); i-- > 0;) {
    bucket_of_[i] = buckets_.size();
    bucket.members.push_back(i);
    bucket.offsets.push_back(bucket.floats);
    bucket.floats += parameters_[i].numel();
    if (bucket.floats >= bucket_floats) {
      bucket.unready = static_cast<int64_t>(bucket.members.size());
      buckets_.push_back(std::move(bucket));
      bucket = Bucket();
    }
  }
  if (!bucket.members.empty()) {
    bucket.unready = static_cast<int64_t>(bucket.members.size());
    buckets_.push_back(std::move(bucket));
  }
}

std::vector<std::vector<size_t>> GradientAverager::bucket_members() const {
  std::vector<std::vector<size_t>> members;
  for (const Bucket& bucket : buckets_) members.push_back(bucket.members);
  return members;
}

void GradientAverager::add() {
  engine::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    engine::Tensor& param = parameters_[i];
    const engine::Tensor grad = param.grad();
    if (!grad.defined()) continue;
    sums_[i] = sums_[i].defined() ? engine::add(sums_[i], grad) : grad.clone();
    reached_[i] = 1;
    param.reset_grad();
  }
}

void GradientAverager::backward(const engine::Tensor& loss, bool last) {
  if (!last) {
    engine::backward(loss);
    add();
    return;
  }
  {
    // A parameter's .grad is final here: its sum over this rank's micro-batches goes into its
    // bucket at once (the same addition add() makes).
    engine::GradReadyHook hook([this](const engine::Tensor& leaf) {
      auto found = index_of_.find(leaf.impl());
      if (found == index_of_.end()) return;  // not a parameter this averager owns
      const size_t i = found->second;
      engine::Tensor& param = parameters_[i];
      const engine::Tensor grad = param.grad();
      const engine::Tensor sum = sums_[i].defined() ? engine::add(sums_[i], grad) : grad;
      reached_[i] = 1;
      param.reset_grad();
      sums_[i] = engine::Tensor();
      ready(i, sum);
    });
    engine::backward(loss);
  }
  events_.push_back("backward done");
}

// The parameter's sum goes into its bucket; buckets whose turn has come start.
void GradientAverager::ready(size_t index, const engine::Tensor& sum) {
  Bucket& bucket = buckets_[bucket_of_[index]];
  ENGINE_CHECK(!in_bucket_[index] && !bucket.started, "gradient averaging: parameter ", index,
               " was ready twice in one step");
  if (!bucket.flat.defined()) {
    bucket.flat =
        engine::Tensor::zeros({bucket.floats}, engine::DType::F32, parameters_[index].device());
  }
  if (sum.defined()) {
    size_t k = 0;
    while (bucket.members[k] != index) ++k;
    const int64_t count = parameters_[index].numel();
    engine::Tensor slot = bucket.flat.slice(0, bucket.offsets[k], bucket.offsets[k] + count);
    slot.copy_(sum.reshape({-1}));
  }
  in_bucket_[index] = true;
  --bucket.unready;
  events_.push_back("ready " + std::to_string(index));
  start_ready_buckets();
}

void GradientAverager::start_ready_buckets() {
  while (next_to_start_ < buckets_.size() && buckets_[next_to_start_].unready == 0) {
    start(next_to_start_++);
  }
}

void GradientAverager::start(size_t b) {
  Bucket& bucket = buckets_[b];
  bucket.started = true;
  events_.push_back("start " + std::to_string(b));
  if (single_process()) return;
  const size_t count = static_cast<size_t>(bucket.floats);
  if (bucket.flat.device().is_cpu()) {
    bucket.request = engine::dist::start_all_reduce_sum(bucket.flat.data<float>(), count);
  } else if (engine::dist::built_with_nccl()) {
    engine::dist::nccl_start_all_reduce_sum(bucket.flat.data<float>(), count,
                                            engine::kernels::cuda_current_stream());
  } else {
    bucket.host = bucket.flat.to(engine::Device::cpu());
    bucket.request = engine::dist::start_all_reduce_sum(bucket.host.data<float>(), count);
  }
}

void GradientAverager::wait(size_t b) {
  Bucket& bucket = buckets_[b];
  events_.push_back("wait " + std::to_string(b));
  if (single_process()) return;
  if (bucket.flat.device().is_cpu()) {
    engine::dist::wait_all_reduce_sum(bucket.request);
    bucket.flat.mark_written_in_place();
  } else if (engine::dist::built_with_nccl()) {
    engine::dist::nccl_wait_all_reduce_sums();
    bucket.flat.mark_written_in_place();
  } else {
    engine::dist::wait_all_reduce_sum(bucket.request);
    bucket.flat.copy_(bucket.host);
  }
}

void GradientAverager::finish(int64_t micro_batches) {
  engine::NoGradGuard no_grad;
  // Parameters no backward of the last micro-batch reached: their sum (or zeros) goes in now.
  for (size_t i = parameters_.size(); i-- > 0;) {
    if (!in_bucket_[i]) ready(i, sums_[i]);
  }
  for (size_t b = 0; b < buckets_.size(); ++b) wait(b);
  // Which parameters some micro-batch of some rank reached (the others keep no gradient).
  std::vector<int64_t> reached = reached_;
  engine::dist::all_reduce_sum(reached.data(), reached.size());
  for (Bucket& bucket : buckets_) {
    const engine::Tensor mean =
        engine::mul_scalar(bucket.flat, 1.0 / static_cast<double>(micro_batches));
    for (size_t k = 0; k < bucket.members.size(); ++k) {
      const size_t i = bucket.members[k];
      if (reached[i] == 0) continue;
      engine::Tensor& param = parameters_[i];
      param.set_grad(mean.slice(0, bucket.offsets[k], bucket.offsets[k] + param.numel())
                         .reshape(param.shape()));
    }
    bucket.unready = static_cast<int64_t>(bucket.members.size());
    bucket.flat = engine::Tensor();
    bucket.host = engine::Tensor();
    bucket.request = 0;
    bucket.started = false;
  }
  sums_.assign(parameters_.size(), engine::Tensor());
  reached_.assign(parameters_.size(), 0);
  in_bucket_.assign(parameters_.size(), false);
  next_to_start_ = 0;
}

}  // namespace dml
