// pgd_step: one projected sign-gradient step of PGD (declaration in engine/ops.h; math, cost and
// NaN conventions in kernels/pgd_step/pgd_step.h).
//
// Not an autograd op: it is the attack's update, like an optimizer step. Inputs that require grad
// are read through detached handles, and the result never has a grad_fn.
#include <cmath>

#include "engine/ops.h"
#include "engine/ops/op_utils.h"
#include "kernels/pgd_step/pgd_step.h"

namespace engine {
namespace {

void check_like_x(const Tensor& x, const Tensor& other, const char* arg) {
  detail::check_same_kind(x, other, "pgd_step", arg);
  ENGINE_CHECK(other.shape() == x.shape(), "pgd_step: ", arg, " ", shape_str(other.shape()),
               " must have the shape of x ", shape_str(x.shape()));
}

}  // namespace

Tensor pgd_step(const Tensor& x, const Tensor& x0, const Tensor& grad, double alpha, double eps,
                Tensor* max_delta) {
  detail::check_floating(x, "pgd_step", "x");
  check_like_x(x, x0, "x0");
  check_like_x(x, grad, "grad");
  // alpha = inf would turn sign(0) = 0 into inf * 0 = NaN; eps = +inf (no projection) is fine.
  ENGINE_CHECK(std::isfinite(alpha) && alpha >= 0.0,
               "pgd_step: alpha must be finite and >= 0, got ", alpha, " (x ", x.str(), ")");
  ENGINE_CHECK(eps >= 0.0, "pgd_step: eps must be >= 0, got ", eps, " (x ", x.str(), ")");
  ENGINE_CHECK(x.device().is_cpu() || x.dtype() == DType::F32,
               "pgd_step: CUDA tensors must be f32, got ", x.str());

  // Detached first, so contiguous() never records anything even under grad mode.
  const Tensor xc = x.detach().contiguous();
  const Tensor x0c = x0.detach().contiguous();
  const Tensor gc = grad.detach().contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor largest;
  if (max_delta != nullptr) largest = Tensor::empty({}, x.dtype(), x.device());

  if (x.device().is_cuda()) {
    kernels::pgd_step_cuda(x.numel(), xc.data<float>(), x0c.data<float>(), gc.data<float>(),
                           static_cast<float>(alpha), static_cast<float>(eps), out.data<float>(),
                           largest.defined() ? largest.data<float>() : nullptr);
  } else {
    detail::dispatch_floating(x.dtype(), "pgd_step", [&](auto zero) {
      using T = decltype(zero);
      kernels::pgd_step_cpu<T>(x.numel(), xc.data<T>(), x0c.data<T>(), gc.data<T>(), T(alpha),
                               T(eps), out.data<T>(),
                               largest.defined() ? largest.data<T>() : nullptr);
    });
  }
  if (max_delta != nullptr) *max_delta = largest;
  return out;
}

}  // namespace engine
