// Linear layer: parameters and the call into engine::linear.
#include "engine/nn/linear.h"

#include "engine/nn/init.h"
#include "engine/ops.h"

namespace engine::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Generator& gen)
    : in_features_(in_features), out_features_(out_features) {
  ENGINE_CHECK(in_features > 0 && out_features > 0, "Linear: sizes must be positive, got in ",
               in_features, ", out ", out_features);
  weight_ = register_parameter("weight", Tensor::empty({out_features, in_features}));
  if (bias) bias_ = register_parameter("bias", Tensor::empty({out_features}));
  init::linear_default_(weight_, bias_, gen);
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight_, bias_); }

}  // namespace engine::nn
