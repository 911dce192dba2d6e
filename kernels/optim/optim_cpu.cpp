// Optimizer updates, CPU reference (formulas in optim.h).
//
// Layout: param, grad and state are contiguous arrays of n elements of the same type.
// Parallelization: plain loops, one element at a time; elements are independent, so OpenMP splits
// large arrays (>= 2^16 elements) across the threads with the same result on any number of them
// (memory bound: two cores draw more bandwidth than one; Adam on C2F2's 3.2M-weight fc1 is a few
// ms per step).
// Cost per element: SGD with momentum reads p, g, b and writes p, b (5 n sizeof(T) bytes, ~6
// FLOPs); Adam reads p, g, m, v and writes p, m, v (7 n sizeof(T) bytes, ~13 FLOPs and a sqrt).
// Both are memory bound on any hardware.
#include <cmath>

#include "kernels/common/check.h"
#include "kernels/common/cpu_parallel.h"
#include "kernels/common/instantiate.h"
#include "kernels/optim/optim.h"

namespace engine::kernels {

template <typename T>
void sgd_update_cpu(int64_t n, const T* grad, const SgdHyper& hyper, T* param, T* momentum_buffer) {
  ENGINE_CHECK(hyper.momentum == 0.0 || momentum_buffer != nullptr, "sgd_update_cpu: momentum ",
               hyper.momentum, " needs a momentum buffer");
  const T lr = static_cast<T>(hyper.lr);
  const T momentum = static_cast<T>(hyper.momentum);
  const T keep = static_cast<T>(1.0 - hyper.dampening);
  const T weight_decay = static_cast<T>(hyper.weight_decay);
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    T d = grad[i] + weight_decay * param[i];
    if (hyper.momentum != 0.0) {
      T b = hyper.first_step ? d : momentum * momentum_buffer[i] + keep * d;
      momentum_buffer[i] = b;
      d = hyper.nesterov ? d + momentum * b : b;
    }
    param[i] -= lr * d;
  }
}

template <typename T>
void adam_update_cpu(int64_t n, const T* grad, const AdamHyper& hyper, T* param, T* exp_avg,
                     T* exp_avg_sq) {
  ENGINE_CHECK(hyper.step >= 1, "adam_update_cpu: step must count from 1, got ", hyper.step);
  const double t = static_cast<double>(hyper.step);
  const T step_size = static_cast<T>(hyper.lr / (1.0 - std::pow(hyper.beta1, t)));
  const T bias_correction2_sqrt = static_cast<T>(std::sqrt(1.0 - std::pow(hyper.beta2, t)));
  // 1 - beta is formed in double: in float, 1 - 0.999f is off by 5e-8 absolute, 5e-5 relative.
  const T beta1 = static_cast<T>(hyper.beta1);
  const T beta2 = static_cast<T>(hyper.beta2);
  const T one_minus_beta1 = static_cast<T>(1.0 - hyper.beta1);
  const T one_minus_beta2 = static_cast<T>(1.0 - hyper.beta2);
  const T eps = static_cast<T>(hyper.eps);
  const T weight_decay = static_cast<T>(hyper.weight_decay);
  const T decay_factor = static_cast<T>(1.0 - hyper.lr * hyper.weight_decay);
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    T g = grad[i];
    T p = param[i];
    if (hyper.decoupled_weight_decay) {
      p *= decay_factor;
    } else {
      g += weight_decay * p;
    }
    T m = beta1 * exp_avg[i] + one_minus_beta1 * g;
    T v = beta2 * exp_avg_sq[i] + one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    // lr * m^ / (sqrt(v^) + eps) with m^ = m / bc1, sqrt(v^) = sqrt(v) / sqrt(bc2), as PyTorch
    // groups it.
    param[i] = p - step_size * m / (std::sqrt(v) / bias_correction2_sqrt + eps);
  }
}

ENGINE_INSTANTIATE_FLOATING(sgd_update_cpu);
ENGINE_INSTANTIATE_FLOATING(adam_update_cpu);

}  // namespace engine::kernels
