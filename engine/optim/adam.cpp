// Adam / AdamW: validates hyperparameters and runs the fused per-tensor update of kernels/optim.
#include "engine/optim/adam.h"

#include <utility>

#include "engine/ops/op_utils.h"
#include "kernels/optim/optim.h"

namespace engine::optim {

namespace {

std::vector<std::vector<Tensor>> params_of(const std::vector<AdamGroup>& groups) {
  std::vector<std::vector<Tensor>> params;
  for (const AdamGroup& group : groups) params.push_back(group.params);
  return params;
}

std::vector<AdamOptions> options_of(const std::string& name, const std::vector<AdamGroup>& groups) {
  std::vector<AdamOptions> options;
  for (size_t g = 0; g < groups.size(); ++g) {
    const AdamOptions& o = groups[g].options;
    ENGINE_CHECK(o.lr >= 0.0, name, ": group ", g, ": invalid learning rate ", o.lr);
    ENGINE_CHECK(o.eps >= 0.0, name, ": group ", g, ": invalid eps ", o.eps);
    ENGINE_CHECK(o.beta1 >= 0.0 && o.beta1 < 1.0, name, ": group ", g, ": invalid beta1 ", o.beta1,
                 " (need 0 <= beta1 < 1)");
    ENGINE_CHECK(o.beta2 >= 0.0 && o.beta2 < 1.0, name, ": group ", g, ": invalid beta2 ", o.beta2,
                 " (need 0 <= beta2 < 1)");
    ENGINE_CHECK(o.weight_decay >= 0.0, name, ": group ", g, ": invalid weight_decay ",
                 o.weight_decay);
    options.push_back(o);
  }
  return options;
}

std::vector<AdamGroup> decoupled(std::vector<AdamGroup> groups) {
  for (AdamGroup& group : groups) group.options.decoupled_weight_decay = true;
  return groups;
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam(std::vector<AdamGroup>{AdamGroup{std::move(params), options}}) {}

Adam::Adam(std::vector<AdamGroup> groups) : Adam("adam", std::move(groups)) {}

Adam::Adam(std::string name, std::vector<AdamGroup> groups)
    : Optimizer(name, params_of(groups)), options_(options_of(name, groups)) {}

AdamOptions& Adam::options(size_t group) {
  ENGINE_CHECK(group < options_.size(), name(), ": group ", group, " out of range");
  return options_[group];
}

double Adam::lr(size_t group) const {
  ENGINE_CHECK(group < options_.size(), name(), ": group ", group, " out of range");
  return options_[group].lr;
}

void Adam::set_lr(size_t group, double lr) { options(group).lr = lr; }

namespace {

kernels::AdamHyper hyper_of(const AdamOptions& o) {
  kernels::AdamHyper hyper;
  hyper.lr = o.lr;
  hyper.beta1 = o.beta1;
  hyper.beta2 = o.beta2;
  hyper.eps = o.eps;
  hyper.weight_decay = o.weight_decay;
  hyper.decoupled_weight_decay = o.decoupled_weight_decay;
  return hyper;
}

}  // namespace

void Adam::update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) {
  const AdamOptions& o = options_[group];
  detail::check_cpu_only(param, name().c_str());
  kernels::AdamHyper hyper = hyper_of(o);
  hyper.step = state.step;
  Tensor exp_avg = state_buffer(state, "exp_avg", param);
  Tensor exp_avg_sq = state_buffer(state, "exp_avg_sq", param);
  detail::dispatch_floating(param.dtype(), name().c_str(), [&](auto zero) {
    using T = decltype(zero);
    kernels::adam_update_cpu<T>(param.numel(), grad.data<T>(), hyper, param.data<T>(),
                                exp_avg.data<T>(), exp_avg_sq.data<T>());
  });
}

// All CUDA parameters of the group in one multi-tensor call; each tensor carries its own step
// count (and so its own bias corrections), since parameters may have been updated unequally often.
void Adam::update_cuda(size_t group, const std::vector<PendingUpdate>& pending) {
  std::vector<kernels::AdamTensorRef> refs;
  refs.reserve(pending.size());
  for (const PendingUpdate& item : pending) {
    ENGINE_CHECK(item.param.dtype() == DType::F32, name(), ": CUDA parameter ", item.index, " ",
                 item.param.str(), " must be f32 (the CUDA optimizer kernels are f32)");
    kernels::AdamTensorRef ref;
    ref.param = item.param.data<float>();
    ref.grad = item.grad.data<float>();
    ref.exp_avg = state_buffer(*item.state, "exp_avg", item.param).data<float>();
    ref.exp_avg_sq = state_buffer(*item.state, "exp_avg_sq", item.param).data<float>();
    ref.n = item.param.numel();
    ref.step = item.state->step;
    refs.push_back(ref);
  }
  kernels::adam_update_multi_cuda(refs.data(), static_cast<int64_t>(refs.size()),
                                  hyper_of(options_[group]));
}

AdamOptions AdamW::defaults() {
  AdamOptions options;
  options.weight_decay = 1e-2;
  options.decoupled_weight_decay = true;
  return options;
}

AdamW::AdamW(std::vector<Tensor> params, const AdamOptions& options)
    : AdamW(std::vector<AdamGroup>{AdamGroup{std::move(params), options}}) {}

AdamW::AdamW(std::vector<AdamGroup> groups) : Adam("adamw", decoupled(std::move(groups))) {}

}  // namespace engine::optim
