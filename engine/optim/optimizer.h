// Optimizers: parameter groups, per-parameter state and the step loop shared by SGD and Adam.
//
// Semantics follow torch.optim: parameters are leaf tensors held by handle (the same TensorImpl
// the model owns, so Module::to() keeps them valid); step() updates, in place and under
// NoGradGuard, every parameter whose .grad is defined and skips the others (their state is not
// created or advanced), as PyTorch skips `grad is None`; zero_grad() resets grads to undefined.
// CUDA parameters (f32) of a group are updated together, in a few fused launches (update_cuda;
// kernels/optim/optim_cuda.cu), with the same arithmetic as the CPU path.
//
// State export (checkpoints): state_dict() returns one flat name -> tensor map, numbering the
// parameters 0, 1, 2, ... across groups in order (PyTorch's optimizer.state_dict() ids):
//   "state.<i>.step"             I64 scalar: number of updates parameter i has received
//   "state.<i>.momentum_buffer"  SGD with momentum
//   "state.<i>.exp_avg"          Adam/AdamW first moment m
//   "state.<i>.exp_avg_sq"       Adam/AdamW second moment v
// Parameters that have not been updated yet have no entries. Hyperparameters (lr, betas, ...)
// are configuration, not state, and are not exported. load_state_dict() replaces the whole state
// after checking every key, copying the tensors to each parameter's device and dtype.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace engine::optim {

using OptimizerState = std::map<std::string, Tensor>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  void step();
  void zero_grad();

  const std::string& name() const { return name_; }
  size_t group_count() const { return groups_.size(); }
  const std::vector<Tensor>& group_params(size_t group) const;
  std::vector<Tensor> params() const;  // all groups, in state numbering order
  // Learning rate of a group (for schedules and logs).
  virtual double lr(size_t group) const = 0;
  virtual void set_lr(size_t group, double lr) = 0;

  OptimizerState state_dict() const;
  void load_state_dict(const OptimizerState& state);

 protected:
  struct ParamState {
    int64_t step = 0;
    std::map<std::string, Tensor> buffers;  // "momentum_buffer", "exp_avg", ...
  };

  // Validates the parameters: defined floating-point leaves, each in one group only.
  Optimizer(std::string name, std::vector<std::vector<Tensor>> groups);

  // One in-place update of a CPU `param` (contiguous) with `grad` (same shape, dtype, device,
  // contiguous). state.step has already been incremented for this update.
  virtual void update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) = 0;

  // A parameter due for an update in this step, as handed to update_cuda.
  struct PendingUpdate {
    size_t index = 0;             // flat parameter index (state numbering), for messages
    Tensor param;                 // contiguous
    Tensor grad;                  // contiguous, same shape, dtype and device
    ParamState* state = nullptr;  // step already incremented
  };
  // Updates all CUDA parameters of a group that have a gradient, in place. step() collects them
  // and calls this once per group, so an optimizer can update every tensor in a few fused
  // launches (multi-tensor apply) instead of one launch per tensor. The default calls update()
  // on each.
  virtual void update_cuda(size_t group, const std::vector<PendingUpdate>& pending);
  // The buffer names this optimizer keeps, for load_state_dict's checks.
  virtual std::vector<std::string> state_names() const = 0;
  // The buffers every updated parameter of `group` has, which load_state_dict requires beside a
  // step (Adam's moments; SGD's momentum buffer when the group has momentum). Without this check a
  // step count without its moments would load, and the next update would run from zero moments
  // with the bias correction of a late step (about 0.03 lr instead of lr on Adam's first update).
  virtual std::vector<std::string> required_state(size_t /*group*/) const { return state_names(); }

  // A zero-filled state buffer shaped like `param`, created on first use.
  static Tensor& state_buffer(ParamState& state, const std::string& buffer, const Tensor& param);

 private:
  std::string name_;
  std::vector<std::vector<Tensor>> groups_;
  std::vector<ParamState> state_;  // by flat parameter index
};

}  // namespace engine::optim
