// l2_normalize (declaration in engine/ops.h; math in kernels/l2_normalize/l2_normalize.h):
// the embedding head of metric N (normalize, then Euclidean distance).
#include <utility>
#include <vector>

#include "engine/ops.h"
#include "engine/ops/op_utils.h"
#include "kernels/l2_normalize/l2_normalize.h"

namespace engine {
Tensor l2_normalize(const Tensor& x, double eps) {
  detail::check_defined(x, "l2_normalize", "x");
  detail::check_floating(x, "l2_normalize", "x");
  ENGINE_CHECK(x.dim() == 2, "l2_normalize: x must be [N, D], got ", shape_str(x.shape()));
  // eps > 0 keeps the divisor of an all-zero row away from 0.
  ENGINE_CHECK(eps > 0.0, "l2_normalize: eps must be positive, got ", eps);
  const int64_t N = x.size(0), D = x.size(1);

  const Tensor xc = x.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor norm = Tensor::empty({N}, x.dtype(), x.device());
  if (x.device().is_cuda()) {
    kernels::l2_normalize_forward_cuda(xc.data<float>(), N, D, float(eps), y.data<float>(),
                                       norm.data<float>());
  } else {
    detail::dispatch_floating(x.dtype(), "l2_normalize", [&](auto zero) {
      using T = decltype(zero);
      kernels::l2_normalize_forward_cpu<T>(xc.data<T>(), N, D, T(eps), y.data<T>(), norm.data<T>());
    });
  }
  if (!needs_tape({x})) return y;

  BackwardFn backward = [x_saved = xc.detach(), norm, eps](const Tensor& grad_output,
                                                           const std::vector<bool>& needs) {
    if (!needs[0]) return std::vector<Tensor>{Tensor()};
    const Tensor dy = grad_output.contiguous();
    Tensor dx = Tensor::empty(x_saved.shape(), x_saved.dtype(), x_saved.device());
    if (dy.device().is_cuda()) {
      kernels::l2_normalize_backward_cuda(dy.data<float>(), x_saved.data<float>(),
                                          norm.data<float>(), x_saved.size(0), x_saved.size(1),
                                          float(eps), dx.data<float>());
      return std::vector<Tensor>{dx};
    }
    detail::dispatch_floating(dy.dtype(), "l2_normalize backward", [&](auto zero) {
      using T = decltype(zero);
      kernels::l2_normalize_backward_cpu<T>(dy.data<T>(), x_saved.data<T>(), norm.data<T>(),
                                            x_saved.size(0), x_saved.size(1), T(eps), dx.data<T>());
    });
    return std::vector<Tensor>{dx};
  };
  return record("l2_normalize", {x}, y, std::move(backward), {{"input", xc}});
}

}  // namespace engine
