// C2F2 and C2F2-BN (layer table and parameter count in c2f2.h).
#include "models/c2f2.h"

#include "engine/backend.h"
#include "engine/ops.h"
#include "kernels/common/check.h"

namespace models {

namespace nn = engine::nn;
using engine::Tensor;

C2F2::C2F2(const C2F2Options& options, engine::Generator& gen)
    : Model(options.batch_norm ? "c2f2-bn" : "c2f2", options.embedding_dim,
            options.batch_norm ? options.bn_branches : 1, {1, 28, 28}) {
  const char* name = options.batch_norm ? "c2f2-bn" : "c2f2";
  ENGINE_CHECK(options.embedding_dim > 0, name, ": embedding_dim must be positive, got ",
               options.embedding_dim);
  ENGINE_CHECK(options.bn_branches >= 1, name, ": bn_branches must be >= 1, got ",
               options.bn_branches);
  ENGINE_CHECK(options.batch_norm || (options.bn_branches == 1 && !options.frozen_bn),
               "c2f2 has no batch norm, so bn_branches ", options.bn_branches, " and frozen_bn ",
               options.frozen_bn ? "true" : "false", " mean nothing: use c2f2-bn");
  const int64_t k = options.bn_branches;

  // Registration order = the papers' layer order, so the module tree (`dml info`) reads like the
  // table in c2f2.h (forward() swaps each ReLU and pool, an identity); parameters are created (and
  // so drawn from `gen`) in the same order as PyTorch's.
  conv1_ = register_module("conv1", std::make_shared<nn::Conv2d>(1, 32, 5, 1, 2, 1, true, gen));
  if (options.batch_norm) bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(32, k));
  relu1_ = register_module("relu1", std::make_shared<nn::ReLU>());
  pool1_ = register_module("pool1", std::make_shared<nn::MaxPool2d>(2));
  conv2_ = register_module("conv2", std::make_shared<nn::Conv2d>(32, 64, 5, 1, 2, 1, true, gen));
  if (options.batch_norm) bn2_ = register_module("bn2", std::make_shared<nn::BatchNorm2d>(64, k));
  relu2_ = register_module("relu2", std::make_shared<nn::ReLU>());
  pool2_ = register_module("pool2", std::make_shared<nn::MaxPool2d>(2));
  flatten_ = register_module("flatten", std::make_shared<nn::Flatten>(1));
  fc1_ = register_module("fc1", std::make_shared<nn::Linear>(64 * 7 * 7, 1024, true, gen));
  if (options.batch_norm) bn3_ = register_module("bn3", std::make_shared<nn::BatchNorm1d>(1024, k));
  relu3_ = register_module("relu3", std::make_shared<nn::ReLU>());
  fc2_ =
      register_module("fc2", std::make_shared<nn::Linear>(1024, options.embedding_dim, true, gen));
  if (options.frozen_bn) nn::set_batch_norm_frozen(*this, true);
}

Tensor C2F2::forward(const Tensor& x) {
  check_input(x);
  if (!bn1_ && engine::fused_kernels()) return forward_fused(x);
  Tensor h = conv1_->forward(x);
  if (bn1_) h = bn1_->forward(h);
  // Pool, then ReLU: relu(max(window)) = max(relu(window)), with the same gradient (dy reaches the
  // window's first maximal cell when it is positive, no cell otherwise), and the ReLU then runs
  // on a quarter of the elements. The module tree keeps the papers' order: ReLU, then pool.
  h = relu1_->forward(pool1_->forward(h));
  h = conv2_->forward(h);
  if (bn2_) h = bn2_->forward(h);
  h = relu2_->forward(pool2_->forward(h));
  h = fc1_->forward(flatten_->forward(h));
  if (bn3_) h = bn3_->forward(h);
  return fc2_->forward(relu3_->forward(h));
}

// The same function through the fused ops (ENGINE_FUSED=1, engine/backend.h): each
// conv -> pool -> ReLU is one engine::conv2d_pool_relu and fc1 -> ReLU one engine::linear_relu.
// C2F2-BN keeps the unfused path (its BNs sit between each linear map and what follows).
Tensor C2F2::forward_fused(const Tensor& x) {
  Tensor h = engine::conv2d_pool_relu(x, conv1_->weight(), conv1_->bias(), conv1_->options());
  h = engine::conv2d_pool_relu(h, conv2_->weight(), conv2_->bias(), conv2_->options());
  h = engine::linear_relu(flatten_->forward(h), fc1_->weight(), fc1_->bias());
  return fc2_->forward(h);
}

}  // namespace models
