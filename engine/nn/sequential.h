// Sequential: children named "0", "1", ... (PyTorch's nn.Sequential), applied in order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/nn/module.h"

namespace engine::nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(const std::vector<std::shared_ptr<Module>>& layers);

  // Appends a layer named by its position; returns it (typed) for later access.
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> layer) {
    auto registered = register_module(std::to_string(layers_.size()), std::move(layer));
    layers_.push_back(registered);
    return registered;
  }

  Tensor forward(const Tensor& x) override;

  size_t size() const { return layers_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const;

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

}  // namespace engine::nn
