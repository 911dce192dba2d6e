// The step loop, parameter bookkeeping and state export shared by every optimizer.
#include "engine/optim/optimizer.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <utility>

#include "engine/autograd.h"

namespace engine::optim {

Optimizer::Optimizer(std::string name, std::vector<std::vector<Tensor>> groups)
    : name_(std::move(name)), groups_(std::move(groups)) {
  ENGINE_CHECK(!groups_.empty(), name_, ": needs at least one parameter group");
  std::set<const TensorImpl*> seen;
  size_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (const Tensor& param : groups_[g]) {
      ENGINE_CHECK(param.defined(), name_, ": parameter ", index, " (group ", g,
                   ") is an undefined tensor");
      ENGINE_CHECK(is_floating(param.dtype()), name_, ": parameter ", index, " ", param.str(),
                   " is not floating-point");
      ENGINE_CHECK(param.is_leaf(), name_, ": parameter ", index, " ", param.str(),
                   " is not a leaf tensor (it has autograd history)");
      ENGINE_CHECK(seen.insert(param.impl()).second, name_, ": parameter ", index,
                   " appears more than once across parameter groups");
      ++index;
    }
  }
  state_.resize(index);
}

const std::vector<Tensor>& Optimizer::group_params(size_t group) const {
  ENGINE_CHECK(group < groups_.size(), name_, ": group ", group, " out of range (", groups_.size(),
               " groups)");
  return groups_[group];
}

std::vector<Tensor> Optimizer::params() const {
  std::vector<Tensor> all;
  for (const auto& group : groups_) all.insert(all.end(), group.begin(), group.end());
  return all;
}

Tensor& Optimizer::state_buffer(ParamState& state, const std::string& buffer, const Tensor& param) {
  Tensor& slot = state.buffers[buffer];
  if (!slot.defined()) slot = Tensor::zeros(param.shape(), param.dtype(), param.device());
  return slot;
}

void Optimizer::update_cuda(size_t group, const std::vector<PendingUpdate>& pending) {
  for (const PendingUpdate& item : pending) update(group, item.param, item.grad, *item.state);
}

void Optimizer::step() {
  NoGradGuard no_grad;
  size_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    std::vector<PendingUpdate> cuda_pending;  // this group's CUDA parameters, updated together
    for (const Tensor& param : groups_[g]) {
      ParamState& state = state_[index];
      Tensor grad = param.grad();
      if (!grad.defined()) {
        ++index;
        continue;
      }
      ENGINE_CHECK(grad.shape() == param.shape() && grad.dtype() == param.dtype() &&
                       grad.device() == param.device(),
                   name_, ": gradient ", grad.str(), " of parameter ", index, " does not match ",
                   param.str());
      ENGINE_CHECK(param.is_contiguous(), name_, ": parameter ", index, " ", param.str(),
                   " must be contiguous to be updated in place");
      // State follows its parameter when the model was moved after the optimizer was built.
      for (auto& entry : state.buffers) {
        Tensor& buffer = entry.second;
        if (buffer.device() != param.device()) buffer = buffer.to(param.device());
        if (buffer.dtype() != param.dtype()) buffer = buffer.to(param.dtype());
      }
      state.step += 1;
      param.mark_written_in_place();  // a graph that saved this weight can no longer backward
      if (param.device().is_cuda()) {
        cuda_pending.push_back(PendingUpdate{index, param, grad.contiguous(), &state});
      } else {
        update(g, param, grad.contiguous(), state);
      }
      ++index;
    }
    if (!cuda_pending.empty()) update_cuda(g, cuda_pending);
  }
}

void Optimizer::zero_grad() {
  for (auto& group : groups_) {
    for (Tensor& param : group) param.reset_grad();
  }
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  for (size_t i = 0; i < state_.size(); ++i) {
    const ParamState& state = state_[i];
    if (state.step == 0) continue;
    std::string prefix = "state." + std::to_string(i) + ".";
    out[prefix + "step"] = Tensor::from_indices({state.step}, {});
    for (const auto& entry : state.buffers) out[prefix + entry.first] = entry.second.detach();
  }
  return out;
}

namespace {

// "state.<i>.<name>" -> (i, name); false when the key has another form.
bool parse_state_key(const std::string& key, size_t* index, std::string* name) {
  const std::string head = "state.";
  if (key.compare(0, head.size(), head) != 0) return false;
  size_t dot = key.find('.', head.size());
  if (dot == std::string::npos || dot == head.size() || dot + 1 == key.size()) return false;
  std::string number = key.substr(head.size(), dot - head.size());
  if (!std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  *index = std::stoul(number);
  *name = key.substr(dot + 1);
  return true;
}

}  // namespace

void Optimizer::load_state_dict(const OptimizerState& state) {
  std::vector<Tensor> all = params();
  std::vector<std::string> names = state_names();
  std::vector<std::string> problems;
  std::vector<ParamState> loaded(all.size());
  for (const auto& entry : state) {
    const std::string& key = entry.first;
    const Tensor& value = entry.second;
    size_t index = 0;
    std::string name;
    if (!parse_state_key(key, &index, &name)) {
      problems.push_back("unexpected key '" + key + "'");
      continue;
    }
    if (index >= all.size()) {
      problems.push_back("'" + key + "': parameter " + std::to_string(index) + " does not exist (" +
                         std::to_string(all.size()) + " parameters)");
      continue;
    }
    if (!value.defined()) {
      problems.push_back("'" + key + "': undefined tensor");
      continue;
    }
    if (name == "step") {
      if (value.dtype() != DType::I64 || value.numel() != 1 || value.to_indices()[0] < 1) {
        problems.push_back("'" + key + "': expected a positive i64 scalar, got " + value.str());
        continue;
      }
      loaded[index].step = value.to_indices()[0];
      continue;
    }
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      problems.push_back("unexpected key '" + key + "' (" + name_ + " keeps no '" + name + "')");
      continue;
    }
    const Tensor& param = all[index];
    if (value.shape() != param.shape() || !is_floating(value.dtype())) {
      problems.push_back("'" + key + "': expected shape " + shape_str(param.shape()) + ", got " +
                         value.str());
      continue;
    }
    Tensor copy = Tensor::empty(param.shape(), param.dtype(), param.device());
    copy.copy_(value);
    loaded[index].buffers[name] = copy;
  }
  size_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::vector<std::string> required = required_state(g);
    for (size_t k = 0; k < groups_[g].size(); ++k, ++index) {
      const ParamState& s = loaded[index];
      const std::string prefix = "'state." + std::to_string(index) + ".";
      if (!s.buffers.empty() && s.step == 0) problems.push_back(prefix + "step' is missing");
      if (s.step == 0) continue;
      for (const std::string& name : required) {
        if (s.buffers.count(name) == 0) {
          problems.push_back(prefix + name + "' is missing (parameter " + std::to_string(index) +
                             " has a step count of " + std::to_string(s.step) + ")");
        }
      }
    }
  }
  if (!problems.empty()) {
    std::ostringstream message;
    message << name_ << ".load_state_dict: " << problems.size() << " problem(s):";
    for (const std::string& problem : problems) message << "\n  " << problem;
    fail(message.str());
  }
  state_ = std::move(loaded);
}

}  // namespace engine::optim
