// Parameter initialization (formulas in init.h).
#include "engine/nn/init.h"

#include <cmath>

#include "engine/autograd.h"

namespace engine::nn::init {

int64_t fan_in(const Tensor& weight) {
  ENGINE_CHECK(weight.dim() >= 2, "init.fan_in: weight must have at least 2 dims, got ",
               weight.str());
  int64_t fan = weight.size(1);
  for (int64_t d = 2; d < weight.dim(); ++d) fan *= weight.size(d);
  ENGINE_CHECK(fan > 0, "init.fan_in: zero fan_in for ", weight.str());
  return fan;
}

void uniform_(const Tensor& t, double low, double high, Generator& gen) {
  NoGradGuard no_grad;
  Tensor values = uniform(t.shape(), low, high, gen, t.dtype(), t.device());
  Tensor target = t;
  target.copy_(values);
}

void normal_(const Tensor& t, double mean, double stddev, Generator& gen) {
  NoGradGuard no_grad;
  Tensor values = normal(t.shape(), mean, stddev, gen, t.dtype(), t.device());
  Tensor target = t;
  target.copy_(values);
}

void constant_(const Tensor& t, double value) {
  NoGradGuard no_grad;
  Tensor target = t;
  target.fill_(value);
}

void kaiming_uniform_(const Tensor& weight, double a, Generator& gen) {
  double gain = std::sqrt(2.0 / (1.0 + a * a));
  double bound = gain * std::sqrt(3.0 / static_cast<double>(fan_in(weight)));
  uniform_(weight, -bound, bound, gen);
}

void linear_default_(const Tensor& weight, const Tensor& bias, Generator& gen) {
  kaiming_uniform_(weight, std::sqrt(5.0), gen);
  if (bias.defined()) {
    double bound = 1.0 / std::sqrt(static_cast<double>(fan_in(weight)));
    uniform_(bias, -bound, bound, gen);
  }
}

}  // namespace engine::nn::init
