// Module bookkeeping: registration, recursive traversal, modes, device moves, state dicts.
#include "engine/nn/module.h"

#include <algorithm>
#include <sstream>

#include "engine/autograd.h"
#include "engine/text.h"

namespace engine::nn {

// ---- StateDict ---------------------------------------------------------------------------------

StateDict::StateDict(std::initializer_list<Entry> entries) {
  for (const Entry& entry : entries) insert(entry.first, entry.second);
}

StateDict::StateDict(const std::map<std::string, Tensor>& entries) {
  for (const auto& entry : entries) insert(entry.first, entry.second);
}

void StateDict::insert(const std::string& name, const Tensor& tensor) {
  ENGINE_CHECK(!contains(name), "state dict: duplicate key '", name, "'");
  index_[name] = entries_.size();
  entries_.emplace_back(name, tensor);
}

void StateDict::set(const std::string& name, const Tensor& tensor) {
  auto found = index_.find(name);
  if (found == index_.end()) {
    insert(name, tensor);
  } else {
    entries_[found->second].second = tensor;
  }
}

void StateDict::erase(const std::string& name) {
  auto found = index_.find(name);
  if (found == index_.end()) return;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(found->second));
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_[entries_[i].first] = i;
}

const Tensor& StateDict::at(const std::string& name) const {
  auto found = index_.find(name);
  ENGINE_CHECK(found != index_.end(), "state dict: no key '", name, "'");
  return entries_[found->second].second;
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> names;
  for (const Entry& entry : entries_) names.push_back(entry.first);
  return names;
}

// ---- registration --------------------------------------------------------------------------

void Module::check_new_name(const std::string& name) const {
  ENGINE_CHECK(!name.empty() && name.find('.') == std::string::npos, "module: invalid name '", name,
               "' (must be non-empty and contain no '.')");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& e) { return e.first == name; });
  };
  ENGINE_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), "module: name '", name,
               "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  check_new_name(name);
  ENGINE_CHECK(value.defined(), "register_parameter: '", name, "' is undefined");
  ENGINE_CHECK(is_floating(value.dtype()), "register_parameter: '", name, "' ", value.str(),
               " is not floating-point");
  if (!value.is_leaf()) value = value.detach();
  value.set_requires_grad(true);
  parameters_.emplace_back(name, value);
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name(name);
  ENGINE_CHECK(value.defined(), "register_buffer: '", name, "' is undefined");
  buffers_.emplace_back(name, value.detach());
  return buffers_.back().second;
}

// ---- traversal -----------------------------------------------------------------------------

void Module::collect_tensors(const std::string& prefix, bool parameters,
                             std::vector<std::pair<std::string, Tensor>>& out,
                             std::vector<const TensorImpl*>& seen) const {
  for (const auto& entry : parameters ? parameters_ : buffers_) {
    const TensorImpl* impl = entry.second.impl();
    if (std::find(seen.begin(), seen.end(), impl) != seen.end()) continue;
    seen.push_back(impl);
    out.emplace_back(prefix + entry.first, entry.second);
  }
  for (const auto& child : children_) {
    child.second->collect_tensors(prefix + child.first + ".", parameters, out, seen);
  }
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<const TensorImpl*> seen;
  collect_tensors("", true, out, seen);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<const TensorImpl*> seen;
  collect_tensors("", false, out, seen);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (const auto& entry : named_parameters()) out.push_back(entry.second);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t count = 0;
  for (const Tensor& p : parameters()) count += p.numel();
  return count;
}

void Module::collect_named_modules(const std::string& prefix,
                                   std::vector<std::pair<std::string, Module*>>& out) {
  out.emplace_back(prefix, this);
  for (const auto& child : children_) {
    std::string name = prefix.empty() ? child.first : prefix + "." + child.first;
    child.second->collect_named_modules(name, out);
  }
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  collect_named_modules("", out);
  return out;
}

// ---- modes and devices ---------------------------------------------------------------------

void Module::train(bool on) {
  training_ = on;
  for (const auto& child : children_) child.second->train(on);
}

void Module::zero_grad() {
  for (Tensor p : parameters()) p.reset_grad();
}

namespace {

// Points `target`'s impl at `source`'s memory and geometry, keeping the impl (and so every handle
// to it, e.g. an optimizer's) alive and unchanged otherwise.
void adopt_memory(const Tensor& target, const Tensor& source) {
  TensorImpl* impl = target.impl();
  impl->storage = source.impl()->storage;
  impl->offset = source.offset();
  impl->strides = source.strides();
  impl->dtype = source.dtype();
}

template <typename Convert>
void convert_in_place(const Tensor& t, Convert convert) {
  if (!t.defined() || !is_floating(t.dtype())) return;
  adopt_memory(t, convert(t.detach()));
  if (t.impl()->grad) t.impl()->grad = convert(Tensor(t.impl()->grad).detach()).impl_ptr();
}

}  // namespace

void Module::to(Device device) {
  NoGradGuard no_grad;
  auto convert = [&](const Tensor& t) { return t.device() == device ? t : t.to(device); };
  for (const auto& entry : parameters_) convert_in_place(entry.second, convert);
  for (const auto& entry : buffers_) convert_in_place(entry.second, convert);
  for (const auto& child : children_) child.second->to(device);
}

void Module::to(DType dtype) {
  ENGINE_CHECK(is_floating(dtype), "module.to: parameters must be floating-point, not ",
               dtype_name(dtype));
  NoGradGuard no_grad;
  auto convert = [&](const Tensor& t) { return t.dtype() == dtype ? t : t.to(dtype); };
  for (const auto& entry : parameters_) convert_in_place(entry.second, convert);
  for (const auto& entry : buffers_) convert_in_place(entry.second, convert);
  for (const auto& child : children_) child.second->to(dtype);
}

// ---- state dict ----------------------------------------------------------------------------

void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (const auto& entry : parameters_) out.insert(prefix + entry.first, entry.second.detach());
  for (const auto& entry : buffers_) out.insert(prefix + entry.first, entry.second.detach());
}

bool Module::is_optional_state(const std::string&) const { return false; }

void Module::collect_state_recursive(const std::string& prefix, StateDict& out,
                                     std::map<std::string, bool>& optional) const {
  StateDict own;
  collect_state(prefix, own);
  for (const auto& entry : own) {
    out.insert(entry.first, entry.second);
    optional[entry.first] = is_optional_state(entry.first.substr(prefix.size()));
  }
  for (const auto& child : children_) {
    child.second->collect_state_recursive(prefix + child.first + ".", out, optional);
  }
}

StateDict Module::state_dict() const {
  StateDict out;
  std::map<std::string, bool> optional;
  collect_state_recursive("", out, optional);
  return out;
}

namespace {}  // namespace

void Module::load_state_dict(const StateDict& state, bool strict) {
  StateDict expected;
  std::map<std::string, bool> optional;
  collect_state_recursive("", expected, optional);

  std::vector<std::string> missing, unexpected, mis_shaped;
  for (const auto& entry : expected) {
    const std::string& name = entry.first;
    if (!state.contains(name)) {
      if (!optional[name]) missing.push_back("'" + name + "'");
      continue;
    }
    const Tensor& value = state.at(name);
    if (!value.defined()) {
      mis_shaped.push_back("'" + name + "' (undefined tensor)");
    } else if (value.shape() != entry.second.shape()) {
      mis_shaped.push_back("'" + name + "' (expected " + shape_str(entry.second.shape()) +
                           ", got " + shape_str(value.shape()) + ")");
    }
  }
  for (const auto& entry : state) {
    if (!expected.contains(entry.first)) unexpected.push_back("'" + entry.first + "'");
  }

  bool key_errors = strict && (!missing.empty() || !unexpected.empty());
  if (key_errors || !mis_shaped.empty()) {
    std::ostringstream message;
    message << "load_state_dict: the state does not match the module";
    if (!missing.empty())
      message << "\n  missing keys (" << missing.size() << "): " << join(missing);
    if (!unexpected.empty()) {
      message << "\n  unexpected keys (" << unexpected.size() << "): " << join(unexpected);
    }
    if (!mis_shaped.empty()) {
      message << "\n  mis-shaped keys (" << mis_shaped.size() << "): " << join(mis_shaped);
    }
    fail(message.str());
  }

  NoGradGuard no_grad;
  for (const auto& entry : expected) {
    if (!state.contains(entry.first)) continue;
    Tensor target = entry.second;
    target.copy_(state.at(entry.first));
  }
}

}  // namespace engine::nn
