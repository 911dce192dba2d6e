// softmax, log_softmax (along any dim) and cross_entropy (rows of [N, C] logits), with their
// backward. All are numerically stable: the kernels subtract the line maximum before exp
// (kernels/softmax/softmax.h).
#include "kernels/softmax/softmax.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops/op_utils.h"

namespace engine {
namespace {

// The [outer, n, inner] view of x around `dim` that the kernels work on.
struct LineView {
  int64_t outer = 1, n = 1, inner = 1;
};

LineView line_view(const Shape& shape, int64_t dim) {
  LineView v;
  for (int64_t d = 0; d < dim; ++d) v.outer *= shape[d];
  v.n = shape[dim];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(shape.size()); ++d) v.inner *= shape[d];
  return v;
}

// softmax and log_softmax share everything but their kernels; both backward kernels read only y.
Tensor softmax_like(bool log, const Tensor& x, int64_t dim) {
  const char* name = log ? "log_softmax" : "softmax";
  detail::check_defined(x, name, "x");
  detail::check_floating(x, name, "x");
  const LineView v = line_view(x.shape(), detail::normalize_dim(dim, x.dim(), name));
  Tensor xc = x.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_cuda()) {
    if (log) {
      kernels::log_softmax_cuda(xc.data<float>(), v.outer, v.n, v.inner, y.data<float>());
    } else {
      kernels::softmax_cuda(xc.data<float>(), v.outer, v.n, v.inner, y.data<float>());
    }
  } else {
    detail::dispatch_floating(x.dtype(), name, [&](auto zero) {
      using T = decltype(zero);
      if (log) {
        kernels::log_softmax_cpu<T>(xc.data<T>(), v.outer, v.n, v.inner, y.data<T>());
      } else {
        kernels::softmax_cpu<T>(xc.data<T>(), v.outer, v.n, v.inner, y.data<T>());
      }
    });
  }
  if (!needs_tape({x})) return y;
  return record(
      name, {x}, y,
      [log, name, v, y_saved = y.detach()](const Tensor& grad, const std::vector<bool>& needs) {
        if (!needs[0]) return std::vector<Tensor>{Tensor()};
        Tensor g = grad.contiguous();
        Tensor dx = Tensor::empty(y_saved.shape(), g.dtype(), g.device());
        if (g.device().is_cuda()) {
          if (log) {
            kernels::log_softmax_backward_cuda(y_saved.data<float>(), g.data<float>(), v.outer, v.n,
                                               v.inner, dx.data<float>());
          } else {
            kernels::softmax_backward_cuda(y_saved.data<float>(), g.data<float>(), v.outer, v.n,
                                           v.inner, dx.data<float>());
          }
          return std::vector<Tensor>{dx};
        }
        detail::dispatch_floating(g.dtype(), name, [&](auto zero) {
          using T = decltype(zero);
          if (log) {
            kernels::log_softmax_backward_cpu<T>(y_saved.data<T>(), g.data<T>(), v.outer, v.n,
                                                 v.inner, dx.data<T>());
          } else {
            kernels::softmax_backward_cpu<T>(y_saved.data<T>(), g.data<T>(), v.outer, v.n, v.inner,
                                             dx.data<T>());
          }
        });
        return std::vector<Tensor>{dx};
      },
      {{"output", y}});
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_like(false, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_like(true, x, dim); }

Tensor cross_entropy(const Tensor& logits, const Tensor& labels) {
  const char* name = "cross_entropy";
  detail::check_defined(logits, name, "logits");
  detail::check_defined(labels, name, "labels");
  detail::check_floating(logits, name, "logits");
  detail::check_dim(logits, 2, name, "logits");
  detail::check_dim(labels, 1, name, "labels");
  ENGINE_CHECK(labels.dtype() == DType::I64, name, ": labels must be i64, got ",
               dtype_name(labels.dtype()));
  ENGINE_CHECK(labels.device() == logits.device(), name, ": labels are on ", labels.device().str(),
               " but logits on ", logits.device().str());
  const int64_t rows = logits.shape()[0];
  const int64_t classes = logits.shape()[1];
  ENGINE_CHECK(labels.shape()[0] == rows, name, ": logits ", shape_str(logits.shape()),
               " need one label per row, got labels ", shape_str(labels.shape()));
  ENGINE_CHECK(rows > 0 && classes > 0, name, ": logits ", shape_str(logits.shape()),
               " must have at least one row and one class");

  Tensor xc = logits.contiguous();
  Tensor yc = labels.contiguous();
  Tensor loss = Tensor::empty({}, logits.dtype(), logits.device());
  Tensor row_lse = Tensor::empty({rows}, logits.dtype(), logits.device());
  if (logits.device().is_cuda()) {
    // Labels are checked inside the kernel (a bad one traps; see kernels/softmax/softmax.h):
    // checking them here would copy them to the host, a synchronization.
    kernels::cross_entropy_cuda(xc.data<float>(), yc.data<int64_t>(), rows, classes,
                                loss.data<float>(), row_lse.data<float>());
  } else {
    detail::dispatch_floating(logits.dtype(), name, [&](auto zero) {
      using T = decltype(zero);
      kernels::cross_entropy_cpu<T>(xc.data<T>(), yc.data<int64_t>(), rows, classes, loss.data<T>(),
                                    row_lse.data<T>());
    });
  }
  if (!needs_tape({logits})) return loss;
  // Labels are never differentiated: their gradient slot is always undefined.
  return record(name, {logits, labels}, loss,
                [name, x_saved = xc.detach(), labels_saved = yc.detach(), row_lse, rows, classes](
                    const Tensor& grad, const std::vector<bool>& needs) {
                  if (!needs[0]) return std::vector<Tensor>{Tensor(), Tensor()};
                  Tensor g = grad.contiguous();
                  Tensor dx = Tensor::empty(x_saved.shape(), g.dtype(), g.device());
                  if (g.device().is_cuda()) {
                    // g stays on the device: the kernel reads grad_loss[0] itself (no sync).
                    kernels::cross_entropy_backward_cuda(
                        x_saved.data<float>(), labels_saved.data<int64_t>(), row_lse.data<float>(),
                        rows, classes, g.data<float>(), dx.data<float>());
                    return std::vector<Tensor>{dx, Tensor()};
                  }
                  detail::dispatch_floating(g.dtype(), name, [&](auto zero) {
                    using T = decltype(zero);
                    kernels::cross_entropy_backward_cpu<T>(
                        x_saved.data<T>(), labels_saved.data<int64_t>(), row_lse.data<T>(), rows,
                        classes, g.data<T>(), dx.data<T>());
                  });
                  return std::vector<Tensor>{dx, Tensor()};
                },
                {{"logits", xc}, {"labels", yc}});
}

}  // namespace engine
