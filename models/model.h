// The common face of every embedding network (C2F2, C2F2-BN, ResNets): an nn::Module that maps
// images in [0, 1] to embeddings [N, D] (no L2 normalization inside: losses, evaluation and
// attacks normalize outside, as robrank does), plus what a caller needs to know without
// knowing the architecture: the registry name, D, the input shape it expects and K.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "engine/nn/module.h"
#include "engine/tensor.h"

namespace models {

class Model : public engine::nn::Module {
 public:
  const std::string& name() const { return name_; }  // registry name, e.g. "resnet18"
  int64_t embedding_dim() const { return embedding_dim_; }
  int64_t bn_branches() const { return bn_branches_; }  // 1 for C2F2 (no batch norm)
  // The [C, H, W] an image must have; 0 for a free dimension (ResNets are fully convolutional up
  // to the global average pool, so any H, W works; 224 is the papers' size).
  const engine::Shape& input_shape() const { return input_shape_; }
  // Throws engine::Error naming the model and the shape unless x is a floating [N, C, H, W]
  // batch matching input_shape().
  void check_input(const engine::Tensor& x) const;

 protected:
  Model(std::string name, int64_t embedding_dim, int64_t bn_branches, engine::Shape input_shape)
      : name_(std::move(name)),
        embedding_dim_(embedding_dim),
        bn_branches_(bn_branches),
        input_shape_(std::move(input_shape)) {}

 private:
  std::string name_;
  int64_t embedding_dim_;
  int64_t bn_branches_;
  engine::Shape input_shape_;
};

}  // namespace models
