// dropout (declaration in engine/ops.h; math in kernels/dropout/dropout.h).
//
// Conventions: p must be in [0, 1]; p = 1 drops every element (output and gradient are zero, as
// in PyTorch). Eval mode or p = 0 returns x itself (same tensor, same autograd history) and draws
// nothing from the generator. Training with p > 0 draws numel(x) uniforms (numel/4 Philox blocks).
#include <utility>
#include <vector>

#include "engine/ops.h"
#include "engine/ops/op_utils.h"
#include "kernels/dropout/dropout.h"

namespace engine {
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  detail::check_defined(x, "dropout", "x");
  detail::check_floating(x, "dropout", "x");
  ENGINE_CHECK(p >= 0.0 && p <= 1.0, "dropout: p must be in [0, 1], got ", p, " (x ",
               shape_str(x.shape()), ")");
  if (!training || p == 0.0) return x;

  const Tensor xc = x.contiguous();
  // The uniforms come from the Philox stream, so the mask is the same on CPU and CUDA.
  const Tensor u = uniform(x.shape(), 0.0, 1.0, gen, x.dtype(), x.device());
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mask = Tensor::empty(x.shape(), x.dtype(), x.device());  // 0 or 1/(1-p)
  if (x.device().is_cuda()) {
    kernels::dropout_forward_cuda(xc.data<float>(), u.data<float>(), x.numel(), float(p),
                                  y.data<float>(), mask.data<float>());
  } else {
    detail::dispatch_floating(x.dtype(), "dropout", [&](auto zero) {
      using T = decltype(zero);
      kernels::dropout_forward_cpu<T>(xc.data<T>(), u.data<T>(), x.numel(), T(p), y.data<T>(),
                                      mask.data<T>());
    });
  }
  if (!needs_tape({x})) return y;

  BackwardFn backward = [mask](const Tensor& grad_output, const std::vector<bool>& needs) {
    if (!needs[0]) return std::vector<Tensor>{Tensor()};
    const Tensor dy = grad_output.contiguous();
    Tensor dx = Tensor::empty(mask.shape(), mask.dtype(), mask.device());
    if (dy.device().is_cuda()) {
      kernels::dropout_backward_cuda(dy.data<float>(), mask.data<float>(), mask.numel(),
                                     dx.data<float>());
      return std::vector<Tensor>{dx};
    }
    detail::dispatch_floating(dy.dtype(), "dropout backward", [&](auto zero) {
      using T = decltype(zero);
      kernels::dropout_backward_cpu<T>(dy.data<T>(), mask.data<T>(), mask.numel(), dx.data<T>());
    });
    return std::vector<Tensor>{dx};
  };
  return record("dropout", {x}, y, std::move(backward));
}

}  // namespace engine
