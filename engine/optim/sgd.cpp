// SGD: validates hyperparameters and runs the fused per-tensor update of kernels/optim.
#include "engine/optim/sgd.h"

#include <utility>

#include "engine/ops/op_utils.h"
#include "kernels/optim/optim.h"

namespace engine::optim {

namespace {

std::vector<std::vector<Tensor>> params_of(const std::vector<SgdGroup>& groups) {
  std::vector<std::vector<Tensor>> params;
  for (const SgdGroup& group : groups) params.push_back(group.params);
  return params;
}

std::vector<SgdOptions> options_of(const std::vector<SgdGroup>& groups) {
  std::vector<SgdOptions> options;
  for (size_t g = 0; g < groups.size(); ++g) {
    const SgdOptions& o = groups[g].options;
    ENGINE_CHECK(o.lr >= 0.0, "sgd: group ", g, ": invalid learning rate ", o.lr);
    ENGINE_CHECK(o.momentum >= 0.0, "sgd: group ", g, ": invalid momentum ", o.momentum);
    ENGINE_CHECK(o.weight_decay >= 0.0, "sgd: group ", g, ": invalid weight_decay ",
                 o.weight_decay);
    ENGINE_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0), "sgd: group ", g,
                 ": nesterov momentum requires momentum > 0 and zero dampening (got momentum ",
                 o.momentum, ", dampening ", o.dampening, ")");
    options.push_back(o);
  }
  return options;
}

}  // namespace

Sgd::Sgd(std::vector<Tensor> params, const SgdOptions& options)
    : Sgd(std::vector<SgdGroup>{SgdGroup{std::move(params), options}}) {}

Sgd::Sgd(std::vector<SgdGroup> groups)
    : Optimizer("sgd", params_of(groups)), options_(options_of(groups)) {}

SgdOptions& Sgd::options(size_t group) {
  ENGINE_CHECK(group < options_.size(), "sgd: group ", group, " out of range");
  return options_[group];
}

double Sgd::lr(size_t group) const {
  ENGINE_CHECK(group < options_.size(), "sgd: group ", group, " out of range");
  return options_[group].lr;
}

void Sgd::set_lr(size_t group, double lr) { options(group).lr = lr; }

std::vector<std::string> Sgd::required_state(size_t group) const {
  ENGINE_CHECK(group < options_.size(), "sgd: group ", group, " out of range");
  if (options_[group].momentum == 0.0) return {};  // plain SGD keeps no buffer
  return state_names();
}

namespace {

kernels::SgdHyper hyper_of(const SgdOptions& o) {
  kernels::SgdHyper hyper;
  hyper.lr = o.lr;
  hyper.momentum = o.momentum;
  hyper.dampening = o.dampening;
  hyper.weight_decay = o.weight_decay;
  hyper.nesterov = o.nesterov;
  return hyper;
}

}  // namespace

void Sgd::update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) {
  const SgdOptions& o = options_[group];
  detail::check_cpu_only(param, "sgd");
  kernels::SgdHyper hyper = hyper_of(o);
  Tensor buffer;
  if (o.momentum != 0.0) {
    hyper.first_step = state.buffers.count("momentum_buffer") == 0;
    buffer = state_buffer(state, "momentum_buffer", param);
  }
  detail::dispatch_floating(param.dtype(), "sgd", [&](auto zero) {
    using T = decltype(zero);
    kernels::sgd_update_cpu<T>(param.numel(), grad.data<T>(), hyper, param.data<T>(),
                               buffer.defined() ? buffer.data<T>() : nullptr);
  });
}

// All CUDA parameters of the group in one multi-tensor call; each tensor carries its own
// first_step flag, since a parameter may have joined later (its grad was undefined before).
void Sgd::update_cuda(size_t group, const std::vector<PendingUpdate>& pending) {
  const SgdOptions& o = options_[group];
  std::vector<kernels::SgdTensorRef> refs;
  refs.reserve(pending.size());
  for (const PendingUpdate& item : pending) {
    ENGINE_CHECK(item.param.dtype() == DType::F32, "sgd: CUDA parameter ", item.index, " ",
                 item.param.str(), " must be f32 (the CUDA optimizer kernels are f32)");
    kernels::SgdTensorRef ref;
    ref.param = item.param.data<float>();
    ref.grad = item.grad.data<float>();
    ref.n = item.param.numel();
    if (o.momentum != 0.0) {
      ref.first_step = item.state->buffers.count("momentum_buffer") == 0;
      ref.momentum_buffer = state_buffer(*item.state, "momentum_buffer", item.param).data<float>();
    }
    refs.push_back(ref);
  }
  kernels::sgd_update_multi_cuda(refs.data(), static_cast<int64_t>(refs.size()), hyper_of(o));
}

}  // namespace engine::optim
