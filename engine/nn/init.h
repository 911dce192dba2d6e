// Parameter initialization, PyTorch's defaults (docs/architecture.md). All functions fill an
// existing tensor in place (under NoGradGuard), drawing from the given Generator so a seed fixes a
// model.
//
// Linear and Conv2d (reset_parameters in torch.nn): weight ~ kaiming_uniform(a = sqrt(5)), i.e.
//   gain = sqrt(2 / (1 + a^2)) = sqrt(1/3),  bound = gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in),
// and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), with fan_in = in_features (Linear) or
// C * R * S (Conv2d weight [K, C, R, S]).
// BatchNorm: weight 1, bias 0, running_mean 0, running_var 1.
#pragma once

#include "engine/random.h"
#include "engine/tensor.h"

namespace engine::nn::init {

// fan_in of a weight of rank >= 2: shape[1] * prod(shape[2:]).
int64_t fan_in(const Tensor& weight);

void uniform_(const Tensor& t, double low, double high, Generator& gen);
void normal_(const Tensor& t, double mean, double stddev, Generator& gen);
void constant_(const Tensor& t, double value);
// U(-bound, bound) with bound = sqrt(2 / (1 + a^2)) * sqrt(3 / fan_in) (fan_in mode, leaky_relu).
void kaiming_uniform_(const Tensor& weight, double a, Generator& gen);

// PyTorch's Linear/Conv2d reset_parameters: kaiming_uniform(a = sqrt(5)) weight and
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) bias (bias may be undefined).
void linear_default_(const Tensor& weight, const Tensor& bias, Generator& gen);

}  // namespace engine::nn::init
