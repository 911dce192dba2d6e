// Batch normalization with K branches (MDProp / AdvProp: one set of statistics and affine
// parameters per kind of input), over x [N, C] (BatchNorm1d) or [N, C, H, W] (BatchNorm2d).
//
// Storage: parameters "weight", "bias" and buffers "running_mean", "running_var" are single
// [K, C] tensors (row k = branch k), which engine::batch_norm takes directly; buffer
// "num_batches_tracked" is an I64 [K] host counter. state_dict() splits them per branch, with
// torchvision's names for branch 0 and MDProp's aux names for the others (views of the rows):
//   weight, bias, running_mean, running_var   [C]   branch 0
//   num_batches_tracked                        []    branch 0 (I64)
//   aux_bn.<k-1>.weight, ..., aux_bn.<k-1>.num_batches_tracked   branch k >= 1
// num_batches_tracked may be missing on load (older checkpoints lack it). MDProp's own
// "aux_bn1."/"aux_bn2." spellings are accepted by the model loader (models/weights.cpp).
//
// Routing: set_routes() gives contiguous row ranges of the batch -> branch (engine/ops.h
// BatchNormRoute). With no routes set, the whole batch goes to branch 0 when computing batch
// statistics (training) and to eval_branch() when using running statistics (eval or frozen).
// frozen = eval-mode BN even while the model trains (robrank's freeze_bn): running statistics
// are used and never updated, but weight and bias still receive gradients.
// Aux branches start as copies of branch 0 (all rows are initialized identically);
// copy_main_to_aux() repeats that after loading a checkpoint that has branch 0 only.
// One [K, C] parameter, one optimizer state: a branch that gets no rows in a step receives a zero
// gradient row, not "no gradient", so Adam still moves it (its momentum and weight decay) and
// every branch shares one step count. MDProp and AdvProp-D route rows to every branch in every
// step, where this equals separate modules; a recipe that left a branch idle would differ from
// PyTorch's separate aux modules with zero_grad(set_to_none=True), which skip it.
#pragma once

#include <string>
#include <vector>

#include "engine/nn/module.h"
#include "engine/ops.h"
#include "engine/random.h"

namespace engine::nn {

class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;

  void set_routes(std::vector<BatchNormRoute> routes);  // empty: the default routing above
  const std::vector<BatchNormRoute>& routes() const { return routes_; }
  void set_eval_branch(int64_t branch);
  int64_t eval_branch() const { return eval_branch_; }
  void set_frozen(bool frozen) { frozen_ = frozen; }
  bool frozen() const { return frozen_; }
  // Copies branch 0's weight, bias, running statistics and counter into branches 1..K-1.
  void copy_main_to_aux();

  int64_t channels() const { return channels_; }
  int64_t branches() const { return branches_; }
  double eps() const { return eps_; }
  double momentum() const { return momentum_; }
  const Tensor& weight() const { return weight_; }  // [K, C]
  const Tensor& bias() const { return bias_; }
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  const Tensor& num_batches_tracked() const { return num_batches_tracked_; }  // I64 [K]

 protected:
  BatchNorm(std::string type_name, int64_t input_dim, int64_t channels, int64_t branches,
            double eps, double momentum);
  void collect_state(const std::string& prefix, StateDict& out) const override;
  bool is_optional_state(const std::string& local_name) const override;

 private:
  std::string type_name_;  // "BatchNorm1d" / "BatchNorm2d", for errors
  int64_t input_dim_;
  int64_t channels_;
  int64_t branches_;
  double eps_;
  double momentum_;
  std::vector<BatchNormRoute> routes_;
  int64_t eval_branch_ = 0;
  bool frozen_ = false;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

// x [N, C].
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t channels, int64_t branches = 1, double eps = 1e-5,
                       double momentum = 0.1);
};

// x [N, C, H, W].
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t channels, int64_t branches = 1, double eps = 1e-5,
                       double momentum = 0.1);
};

// ---- model-wide switches (every BatchNorm in `model`, recursively) ----
std::vector<BatchNorm*> batch_norm_layers(Module& model);
void set_batch_norm_routes(Module& model, const std::vector<BatchNormRoute>& routes);
void set_batch_norm_eval_branch(Module& model, int64_t branch);
void set_batch_norm_frozen(Module& model, bool frozen);
// Adds independent N(0, stddev^2) noise to the affine parameters (weight and bias) of every
// extra branch k >= 1, so branches that start as copies of branch 0 (docs/architecture.md:
// "optionally plus noise") are not identical; branch 0 and the running statistics are left alone.
void perturb_batch_norm_aux_branches(Module& model, double stddev, Generator& gen);

}  // namespace engine::nn
