// index_select: rows of x picked by an I64 index vector (kernels/index_select). The backward
// scatter-adds the gradient rows back, so a row picked twice receives both gradients.
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops/op_utils.h"
#include "engine/tensor.h"
#include "kernels/index_select/index_select.h"

namespace engine {

Tensor index_select(const Tensor& x, const Tensor& index) {
  detail::check_defined(x, "index_select", "x");
  detail::check_defined(index, "index_select", "index");
  ENGINE_CHECK(x.dim() >= 1, "index_select: x must have at least one dimension, got shape ",
               shape_str(x.shape()));
  ENGINE_CHECK(index.dtype() == DType::I64, "index_select: index must be i64, got ",
               dtype_name(index.dtype()));
  ENGINE_CHECK(index.dim() == 1, "index_select: index must be 1-D, got shape ",
               shape_str(index.shape()));
  ENGINE_CHECK(index.device() == x.device(), "index_select: x is on ", x.device().str(),
               " but index is on ", index.device().str());

  int64_t rows = x.size(0);
  int64_t row_size = 1;
  for (int64_t d = 1; d < x.dim(); ++d) row_size *= x.size(d);
  int64_t count = index.size(0);
  Shape out_shape = x.shape();
  out_shape[0] = count;

  Tensor x_dense = x.detach().contiguous();
  Tensor index_dense = index.contiguous();
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  auto run = [&](auto zero) {
    using T = decltype(zero);
    kernels::index_select_forward_cpu<T>(x_dense.data<T>(), rows, row_size,
                                         index_dense.data<int64_t>(), count, out.data<T>());
  };
  if (x.device().is_cuda() && x.dtype() == DType::I64) {
    // Indices are checked inside the kernel (a bad one traps; see
    // kernels/index_select/index_select.h): checking here would copy them to the host (a sync).
    kernels::index_select_forward_cuda(x_dense.data<int64_t>(), rows, row_size,
                                       index_dense.data<int64_t>(), count, out.data<int64_t>());
  } else if (x.device().is_cuda()) {
    kernels::index_select_forward_cuda(x_dense.data<float>(), rows, row_size,
                                       index_dense.data<int64_t>(), count, out.data<float>());
  } else if (x.dtype() == DType::I64) {
    run(int64_t{});  // e.g. labels gathered with the same index as their embeddings
  } else {
    detail::dispatch_floating(x.dtype(), "index_select", run);
  }

  if (!needs_tape({x, index})) return out;
  Shape x_shape = x.shape();
  return record(
      "index_select", {x, index}, out,
      [index_dense, x_shape, rows, row_size, count](const Tensor& grad,
                                                    const std::vector<bool>& needs) {
        std::vector<Tensor> grads(2);  // grads[1]: the index has no gradient
        if (needs[0]) {
          Tensor dy = grad.contiguous();
          Tensor dx = Tensor::empty(x_shape, dy.dtype(), dy.device());
          if (dy.device().is_cuda()) {
            // Deterministic: the CPU's sums in the CPU's order
            // (kernels/index_select/index_select.h).
            kernels::index_select_backward_cuda(dy.data<float>(), index_dense.data<int64_t>(),
                                                count, rows, row_size, dx.data<float>());
            grads[0] = dx;
            return grads;
          }
          detail::dispatch_floating(dy.dtype(), "index_select", [&](auto zero) {
            using T = decltype(zero);
            kernels::index_select_backward_cpu<T>(dy.data<T>(), index_dense.data<int64_t>(), count,
                                                  rows, row_size, dx.data<T>());
          });
          grads[0] = dx;
        }
        return grads;
      },
      {{"index", index_dense}});
}

}  // namespace engine
