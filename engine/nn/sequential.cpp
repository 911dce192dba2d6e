// Sequential container.
#include "engine/nn/sequential.h"

namespace engine::nn {

Sequential::Sequential(const std::vector<std::shared_ptr<Module>>& layers) {
  for (const auto& layer : layers) push_back(layer);
}

Tensor Sequential::forward(const Tensor& x) {
  ENGINE_CHECK(!layers_.empty(), "Sequential: forward through an empty container");
  Tensor y = x;
  for (const auto& layer : layers_) y = layer->forward(y);
  return y;
}

const std::shared_ptr<Module>& Sequential::operator[](size_t i) const {
  ENGINE_CHECK(i < layers_.size(), "Sequential: index ", i, " out of range (", layers_.size(),
               " layers)");
  return layers_[i];
}

}  // namespace engine::nn
