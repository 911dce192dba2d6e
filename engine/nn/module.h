// Module: the base of every layer and model. A module owns named parameters (leaf tensors that
// require grad), named buffers (state that is saved but not trained, e.g. BN running statistics)
// and named child modules, and computes forward(x).
//
// Names are recursive, as in PyTorch: a parameter `weight` of child `conv1` of child `0` of child
// `layer1` is "layer1.0.conv1.weight". state_dict() lists, per module, its parameters, then its
// buffers, then its children's entries (PyTorch's order).
//
// Handles: parameters are held by Tensor handle, and the same handles are given to optimizers.
// to(device) / to(dtype) therefore move each tensor *in place* — the TensorImpl keeps its
// identity and gets new storage — so an optimizer built before the move still updates the
// model's parameters (its own state buffers follow on the next step). Views created before a
// move (e.g. an earlier state_dict()) keep pointing at the old memory.
//
// I64 buffers (BatchNorm's num_batches_tracked) are host-side counters that no kernel reads; they
// stay on the CPU and keep their dtype when the module moves.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace engine::nn {

// An insertion-ordered map from names to tensors (PyTorch's OrderedDict state_dict).
class StateDict {
 public:
  using Entry = std::pair<std::string, Tensor>;

  StateDict() = default;
  StateDict(std::initializer_list<Entry> entries);
  explicit StateDict(const std::map<std::string, Tensor>& entries);  // in key order

  // Adds a new name (error if it is already present).
  void insert(const std::string& name, const Tensor& tensor);
  // Replaces the tensor of a name, or adds it at the end.
  void set(const std::string& name, const Tensor& tensor);
  void erase(const std::string& name);  // no-op if absent
  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  const Tensor& at(const std::string& name) const;  // error naming the key if absent
  std::vector<std::string> keys() const;

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }

 private:
  std::vector<Entry> entries_;
  std::map<std::string, size_t> index_;  // name -> position in entries_
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  // Modules own their tensors by handle; a copy would silently alias them.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }

  // ---- traversal (recursive, each tensor listed once even if registered twice) ----
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  // This module first (name ""), then every descendant depth-first in registration order.
  std::vector<std::pair<std::string, Module*>> named_modules();
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }
  int64_t parameter_count() const;  // total number of parameter elements

  // ---- modes ----
  void train(bool on = true);  // recursive
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Resets every parameter's .grad to undefined.
  void zero_grad();

  // Moves / converts every parameter, its gradient and every floating-point buffer in place.
  void to(Device device);
  void to(DType dtype);

  // ---- serialization ----
  // Detached tensors sharing memory with the module (copy them to keep a snapshot).
  StateDict state_dict() const;
  // Copies values (any dtype/device) into the module's tensors under NoGradGuard. Every missing,
  // unexpected and mis-shaped key is reported in one engine::Error, and nothing is copied then.
  // strict = false tolerates missing and unexpected keys (never shape mismatches). Keys a module
  // marks optional (BatchNorm's num_batches_tracked) may always be missing.
  void load_state_dict(const StateDict& state, bool strict = true);

 protected:
  // Registers a leaf parameter (requires_grad is switched on) and returns its handle.
  Tensor register_parameter(const std::string& name, Tensor value);
  Tensor register_buffer(const std::string& name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    check_new_name(name);
    ENGINE_CHECK(module != nullptr, "register_module: '", name, "' is null");
    children_.emplace_back(name, module);
    return module;
  }

  // The state entries of this module alone (not its children), each name prefixed by `prefix`.
  // Default: parameters then buffers, detached. BatchNorm overrides it to split branches.
  virtual void collect_state(const std::string& prefix, StateDict& out) const;
  // Names (without prefix) that load_state_dict accepts as missing.
  virtual bool is_optional_state(const std::string& local_name) const;

  const std::vector<std::pair<std::string, Tensor>>& own_parameters() const { return parameters_; }
  const std::vector<std::pair<std::string, Tensor>>& own_buffers() const { return buffers_; }

 private:
  void check_new_name(const std::string& name) const;
  void collect_tensors(const std::string& prefix, bool parameters,
                       std::vector<std::pair<std::string, Tensor>>& out,
                       std::vector<const TensorImpl*>& seen) const;
  void collect_state_recursive(const std::string& prefix, StateDict& out,
                               std::map<std::string, bool>& optional) const;
  void collect_named_modules(const std::string& prefix,
                             std::vector<std::pair<std::string, Module*>>& out);

  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace engine::nn
