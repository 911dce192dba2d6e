// Synchronized batch norm: the batch statistics of every BatchNorm summed over the processes of a
// data-parallel run (train.batch_norm "synchronized", docs/distributed.md), as
// torch.nn.SyncBatchNorm does.
//
// While a BatchNormSync is alive (this thread), a BatchNorm that computes batch statistics
// (training, not frozen) sums per routed branch k and channel c the count n, sum x and sum x^2
// of its rows on every process with `sum_over_processes` (one call per layer, [K, 2, C] sums and
// K counts), normalizes with mean = sum x / n and the biased var = sum x^2 / n - mean^2 of the
// whole global batch, and updates the running statistics with them (the unbiased var, times
// n / (n - 1)), the same on every process. The sums are a differentiable op whose backward sums
// its gradient over the processes too: the gradient of the statistics is the sum over all
// processes' dy and dy * xhat, so dx of each row is the whole batch's batch-norm gradient (what
// SyncBatchNorm's backward all-reduces); weight and bias get this process's part, which the
// gradient all-reduce adds up. A K-branch BN (MDProp's clean / STAX / MTAX, AdvProp's aux BN)
// sums each branch's statistics separately: branch k's mean is over the rows every process
// routes to branch k. Every process must run the same BN layers in the same order (the training
// forward; attacks run in eval mode, which syncs nothing). With one process it is the plain batch
// norm of its batch up to rounding (sum x^2 / n - mean^2 against the kernels' two-pass variance).
//
// The engine knows no processes: the caller passes the sum (tools/dml: engine::dist's MPI
// all-reduce on host doubles; the statistics are [K, 2, C] values per layer, small next to the
// gradients).
#pragma once

#include <functional>
#include <vector>

#include "engine/ops.h"
#include "engine/tensor.h"

namespace engine::nn {

// Sums `values` element-wise over the processes, in place.
using SumOverProcesses = std::function<void(std::vector<double>& values)>;

class BatchNormSync {
 public:
  explicit BatchNormSync(SumOverProcesses sum_over_processes);
  ~BatchNormSync();
  BatchNormSync(const BatchNormSync&) = delete;
  BatchNormSync& operator=(const BatchNormSync&) = delete;

  // The live BatchNormSync of this thread, or nullptr.
  static const BatchNormSync* active();
  const SumOverProcesses& sum_over_processes() const { return sum_; }

 private:
  SumOverProcesses sum_;
  BatchNormSync* previous_;
};

// engine::batch_norm in training mode (the same arguments, engine/ops.h) with the statistics of
// each routed branch summed over the processes by `sync`.
Tensor synchronized_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                               const Tensor& running_mean, const Tensor& running_var,
                               const std::vector<BatchNormRoute>& routes, double momentum,
                               double eps, const BatchNormSync& sync);

}  // namespace engine::nn
