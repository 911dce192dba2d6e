// Scalar and unary elementwise ops (add_scalar, mul_scalar, neg, relu, exp, log, sqrt, pow, abs,
// sign, clamp) and their backward. All share one path: validate, make contiguous, run the
// kernel, and save for the backward only the tensor its derivative reads (x or y; see
// kernels/unary/unary.h).
#include <cmath>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops/op_utils.h"
#include "kernels/unary/unary.h"

namespace engine {
namespace {

using kernels::UnaryOp;
using kernels::UnaryParams;

Tensor unary(UnaryOp op, const char* name, const Tensor& x, UnaryParams params = {}) {
  detail::check_defined(x, name, "x");
  detail::check_floating(x, name, "x");
  Tensor xc = x.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_cuda()) {
    kernels::unary_cuda(op, xc.data<float>(), xc.numel(), params, y.data<float>());
  } else {
    detail::dispatch_floating(x.dtype(), name, [&](auto zero) {
      using T = decltype(zero);
      kernels::unary_cpu<T>(op, xc.data<T>(), xc.numel(), params, y.data<T>());
    });
  }
  if (!needs_tape({x})) return y;

  Tensor x_saved = kernels::unary_backward_reads_x(op) ? xc.detach() : Tensor();
  Tensor y_saved = kernels::unary_backward_reads_y(op) ? y.detach() : Tensor();
  return record(name, {x}, y,
                [op, name, params, x_shape = x.shape(), x_saved, y_saved](
                    const Tensor& grad, const std::vector<bool>& needs) {
                  if (!needs[0]) return std::vector<Tensor>{Tensor()};
                  Tensor g = grad.contiguous();
                  Tensor dx = Tensor::empty(x_shape, g.dtype(), g.device());
                  if (g.device().is_cuda()) {
                    const float* x_data = x_saved.defined() ? x_saved.data<float>() : nullptr;
                    const float* y_data = y_saved.defined() ? y_saved.data<float>() : nullptr;
                    kernels::unary_backward_cuda(op, x_data, y_data, g.data<float>(), g.numel(),
                                                 params, dx.data<float>());
                    return std::vector<Tensor>{dx};
                  }
                  detail::dispatch_floating(g.dtype(), name, [&](auto zero) {
                    using T = decltype(zero);
                    const T* x_data = x_saved.defined() ? x_saved.data<T>() : nullptr;
                    const T* y_data = y_saved.defined() ? y_saved.data<T>() : nullptr;
                    kernels::unary_backward_cpu<T>(op, x_data, y_data, g.data<T>(), g.numel(),
                                                   params, dx.data<T>());
                  });
                  return std::vector<Tensor>{dx};
                },
                {{"input", x_saved}, {"output", y_saved}});
}

UnaryParams scalar_param(double value) {
  UnaryParams params;
  params.scalar = value;
  return params;
}

}  // namespace

Tensor add_scalar(const Tensor& x, double value) {
  return unary(UnaryOp::AddScalar, "add_scalar", x, scalar_param(value));
}
Tensor mul_scalar(const Tensor& x, double value) {
  return unary(UnaryOp::MulScalar, "mul_scalar", x, scalar_param(value));
}
Tensor neg(const Tensor& x) { return unary(UnaryOp::Neg, "neg", x); }
Tensor relu(const Tensor& x) { return unary(UnaryOp::Relu, "relu", x); }
Tensor exp(const Tensor& x) { return unary(UnaryOp::Exp, "exp", x); }
Tensor log(const Tensor& x) { return unary(UnaryOp::Log, "log", x); }
Tensor sqrt(const Tensor& x) { return unary(UnaryOp::Sqrt, "sqrt", x); }
Tensor pow(const Tensor& x, double exponent) {
  return unary(UnaryOp::Pow, "pow", x, scalar_param(exponent));
}
Tensor abs(const Tensor& x) { return unary(UnaryOp::Abs, "abs", x); }
Tensor sign(const Tensor& x) { return unary(UnaryOp::Sign, "sign", x); }

Tensor clamp(const Tensor& x, double low, double high) {
  ENGINE_CHECK(!(low > high) && !std::isnan(low) && !std::isnan(high), "clamp: low (", low,
               ") must not exceed high (", high, ")");
  UnaryParams params;
  params.low = low;
  params.high = high;
  return unary(UnaryOp::Clamp, "clamp", x, params);
}

}  // namespace engine
