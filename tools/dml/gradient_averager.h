// The gradients of one step over its micro-batches and ranks (tools/dml/data_parallel.h), summed
// over the ranks in buckets whose all-reduce overlaps the backward of the rank's last
// micro-batch, as PyTorch's DistributedDataParallel does (docs/distributed.md, "Data-parallel
// training").
//
// Buckets: the parameters in reverse order (the order a backward finishes them: the last layer
// first), cut after the parameter that brings a bucket to bucket_floats (25 MiB by default, DDP's
// bucket size); each bucket is one flat f32 buffer, the parameters' sums side by side. During the
// backward of the last micro-batch (backward(loss, true)) the gradient-ready hook
// (engine/grad_ready.h) copies each parameter's final sum into its bucket, and a bucket's sum over
// the ranks starts as soon as all its parameters are in and every earlier bucket has started (the
// ranks must start them in the same order): MPI_Iallreduce on host buffers, NCCL on a side stream
// on device buffers where built, else MPI on a host copy. Buckets with a parameter the backward
// did not reach start after it. finish() waits for all, in order.
//
// The result is today's after-backward all-reduce of the same sums: each element is the sum over
// the ranks of the rank's sum over its micro-batches in order, times 1/G; with two ranks a + b
// whatever the buckets, so two ranks still equal one process with two micro-batches bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/tensor.h"

namespace dml {

// PyTorch DDP's bucket size, 25 MiB of f32.
constexpr int64_t kGradientBucketFloats = int64_t{25} << 18;

// The gradients of one step over its micro-batches. A micro-batch's backward(loss, last) runs
// engine::backward and moves every parameter's .grad into the sum (the .grad is reset, so an
// attack of the next micro-batch cannot add to it); on the last one the buckets' sums over the
// ranks start during the backward. add() does the moving alone, after a backward run elsewhere.
// finish() starts the buckets not yet started, waits for all, multiplies by 1/G and gives each
// parameter the mean as its .grad. A parameter that no micro-batch of any rank reached keeps no
// gradient (the optimizer skips it, as it does in a single step); one that only some reached
// counts zeros for the others.
class GradientAverager {
 public:
  explicit GradientAverager(std::vector<engine::Tensor> parameters,
                            int64_t bucket_floats = kGradientBucketFloats);
  void backward(const engine::Tensor& loss, bool last);
  void add();
  void finish(int64_t micro_batches);

  // What happened, in order (tests): "ready <parameter index>" when a parameter's sum went into
  // its bucket, "start <bucket>", "backward done", "wait <bucket>".
  const std::vector<std::string>& events() const { return events_; }
  // The parameter indices of each bucket, in bucket order.
  std::vector<std::vector<size_t>> bucket_members() const;

 private:
  struct Bucket {
    std::vector<size_t> members;   // parameter indices, in reverse parameter order
    std::vector<int64_t> offsets;  // of each member in `flat`
    int64_t floats = 0;
    int64_t unready = 0;  // members whose sum is not in `flat` yet
    engine::Tensor flat;  // [floats] on the parameters' device, zeros until filled
    engine::Tensor host;  // the host copy summed by MPI when the device's sum cannot be
    int64_t request = 0;  // engine::dist::start_all_reduce_sum's id
    bool started = false;
  };
  void make_buckets(int64_t bucket_floats);
  void ready(size_t index, const engine::Tensor& sum);
  void start_ready_buckets();
  void start(size_t b);
  void wait(size_t b);

  std::vector<engine::Tensor> parameters_;
  std::vector<engine::Tensor> sums_;  // undefined: no gradient yet
  std::vector<int64_t> reached_;      // 1 when some micro-batch of this rank gave a gradient
  std::vector<bool> in_bucket_;       // the parameter's sum is in its bucket
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // per parameter
  std::unordered_map<const engine::TensorImpl*, size_t> index_of_;
  size_t next_to_start_ = 0;
  std::vector<std::string> events_;
};

}  // namespace dml
