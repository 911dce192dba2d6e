// Multi-branch BatchNorm module: routing, the call into engine::batch_norm, per-branch state.
#include "engine/nn/batch_norm.h"

#include <cmath>
#include <utility>

#include "engine/autograd.h"
#include "engine/nn/batch_norm_sync.h"
#include "kernels/common/check.h"

namespace engine::nn {

namespace {

// Row `k` of a [K, C] tensor (or element k of a [K] tensor) as a view without autograd history.
Tensor branch_row(const Tensor& t, int64_t k) {
  if (t.dim() == 1) return make_view(t, {}, {}, t.offset() + k * t.strides()[0]);
  return make_view(t, {t.size(1)}, {t.strides()[1]}, t.offset() + k * t.strides()[0]);
}

}  // namespace

BatchNorm::BatchNorm(std::string type_name, int64_t input_dim, int64_t channels, int64_t branches,
                     double eps, double momentum)
    : type_name_(std::move(type_name)),
      input_dim_(input_dim),
      channels_(channels),
      branches_(branches),
      eps_(eps),
      momentum_(momentum) {
  ENGINE_CHECK(channels > 0 && branches > 0, type_name_, ": channels and branches must be ",
               "positive, got ", channels, " channels, ", branches, " branches");
  ENGINE_CHECK(eps > 0.0 && momentum >= 0.0 && momentum <= 1.0, type_name_, ": invalid eps ", eps,
               " or momentum ", momentum);
  weight_ = register_parameter("weight", Tensor::ones({branches, channels}));
  bias_ = register_parameter("bias", Tensor::zeros({branches, channels}));
  running_mean_ = register_buffer("running_mean", Tensor::zeros({branches, channels}));
  running_var_ = register_buffer("running_var", Tensor::ones({branches, channels}));
  num_batches_tracked_ =
      register_buffer("num_batches_tracked", Tensor::zeros({branches}, DType::I64));
}

BatchNorm1d::BatchNorm1d(int64_t channels, int64_t branches, double eps, double momentum)
    : BatchNorm("BatchNorm1d", 2, channels, branches, eps, momentum) {}

BatchNorm2d::BatchNorm2d(int64_t channels, int64_t branches, double eps, double momentum)
    : BatchNorm("BatchNorm2d", 4, channels, branches, eps, momentum) {}

void BatchNorm::set_routes(std::vector<BatchNormRoute> routes) {
  for (const BatchNormRoute& route : routes) {
    ENGINE_CHECK(route.branch >= 0 && route.branch < branches_, type_name_, ": route [",
                 route.begin, ", ", route.end, ") names branch ", route.branch, " of ", branches_);
  }
  routes_ = std::move(routes);
}

void BatchNorm::set_eval_branch(int64_t branch) {
  ENGINE_CHECK(branch >= 0 && branch < branches_, type_name_, ": eval branch ", branch,
               " out of range (", branches_, " branches)");
  eval_branch_ = branch;
}

Tensor BatchNorm::forward(const Tensor& x) {
  ENGINE_CHECK(x.defined() && x.dim() == input_dim_ && x.size(1) == channels_, type_name_,
               ": expected a ", input_dim_, "-D input with ", channels_, " channels in dim 1, got ",
               x.defined() ? x.str() : std::string("undefined"));
  bool batch_stats = is_training() && !frozen_;
  std::vector<BatchNormRoute> routes =
      routes_.empty() ? single_branch_route(x.size(0), batch_stats ? 0 : eval_branch_) : routes_;
  // Batch statistics over all processes while a BatchNormSync is alive (batch_norm_sync.h).
  const BatchNormSync* sync = batch_stats ? BatchNormSync::active() : nullptr;
  Tensor y = sync != nullptr ? synchronized_batch_norm(x, weight_, bias_, running_mean_,
                                                       running_var_, routes, momentum_, eps_, *sync)
                             : batch_norm(x, weight_, bias_, running_mean_, running_var_, routes,
                                          batch_stats, momentum_, eps_);
  if (batch_stats) {
    int64_t* counts = num_batches_tracked_.data<int64_t>();
    for (const BatchNormRoute& route : routes) counts[route.branch] += 1;
  }
  return y;
}

void BatchNorm::copy_main_to_aux() {
  NoGradGuard no_grad;
  for (const Tensor& t : {weight_, bias_, running_mean_, running_var_, num_batches_tracked_}) {
    for (int64_t k = 1; k < branches_; ++k) branch_row(t, k).copy_(branch_row(t, 0));
  }
}

void BatchNorm::collect_state(const std::string& prefix, StateDict& out) const {
  for (int64_t k = 0; k < branches_; ++k) {
    std::string name = k == 0 ? prefix : prefix + "aux_bn." + std::to_string(k - 1) + ".";
    out.insert(name + "weight", branch_row(weight_, k));
    out.insert(name + "bias", branch_row(bias_, k));
    out.insert(name + "running_mean", branch_row(running_mean_, k));
    out.insert(name + "running_var", branch_row(running_var_, k));
    out.insert(name + "num_batches_tracked", branch_row(num_batches_tracked_, k));
  }
}

bool BatchNorm::is_optional_state(const std::string& local_name) const {
  const std::string counter = "num_batches_tracked";
  return local_name.size() >= counter.size() &&
         local_name.compare(local_name.size() - counter.size(), counter.size(), counter) == 0;
}

// ---- model-wide switches -------------------------------------------------------------------

std::vector<BatchNorm*> batch_norm_layers(Module& model) {
  std::vector<BatchNorm*> layers;
  for (const auto& entry : model.named_modules()) {
    if (auto* bn = dynamic_cast<BatchNorm*>(entry.second)) layers.push_back(bn);
  }
  return layers;
}

void set_batch_norm_routes(Module& model, const std::vector<BatchNormRoute>& routes) {
  for (BatchNorm* bn : batch_norm_layers(model)) bn->set_routes(routes);
}

void set_batch_norm_eval_branch(Module& model, int64_t branch) {
  for (BatchNorm* bn : batch_norm_layers(model)) bn->set_eval_branch(branch);
}

void set_batch_norm_frozen(Module& model, bool frozen) {
  for (BatchNorm* bn : batch_norm_layers(model)) bn->set_frozen(frozen);
}

void perturb_batch_norm_aux_branches(Module& model, double stddev, Generator& gen) {
  ENGINE_CHECK(std::isfinite(stddev) && stddev >= 0.0,
               "perturb_batch_norm_aux_branches: stddev must be finite and >= 0, got ", stddev);
  if (stddev == 0.0) return;
  NoGradGuard no_grad;
  for (BatchNorm* bn : batch_norm_layers(model)) {
    for (Tensor parameter : {bn->weight(), bn->bias()}) {  // [K, C], row k = branch k
      const int64_t branches = parameter.size(0);
      if (branches < 2) continue;
      Tensor aux = parameter.slice(0, 1, branches);  // a view: the update lands in the parameter
      aux.copy_(aux + normal(aux.shape(), 0.0, stddev, gen, aux.dtype()).to(aux.device()));
    }
  }
}

}  // namespace engine::nn
