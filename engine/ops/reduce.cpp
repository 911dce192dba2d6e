// sum, mean (over all elements or chosen dims), sum_to_shape and logsumexp, with their backward.
//
// Every sum here reduces a contiguous tensor over a set of dimensions. The kernel sums the middle
// axis of [outer, reduce, inner]; a set of dimensions is covered by one kernel call per run of
// adjacent reduced dimensions (one call for "all", for one dim, or for trailing dims). The
// backward of a sum repeats the output gradient over the reduced dimensions (a stride-0
// broadcast, scaled by 1/count for a mean).
#include <utility>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops/op_utils.h"
#include "kernels/reduce/reduce.h"
#include "kernels/softmax/softmax.h"

namespace engine {
namespace {

// dx = scale * dy repeated over the reduced dims: dy's elements are laid out like x's shape with
// the reduced dims set to 1, which is a broadcast layout with stride 0 along those dims.
Tensor broadcast_back(const Tensor& grad, const Shape& x_shape, const std::vector<bool>& reduced,
                      double scale, const char* op) {
  Tensor g = grad.contiguous();
  Tensor dx = Tensor::empty(x_shape, g.dtype(), g.device());
  kernels::StridedLayout layout;
  layout.ndim = static_cast<int>(x_shape.size());
  int64_t stride = 1;
  for (int64_t d = layout.ndim - 1; d >= 0; --d) {
    layout.shape[d] = x_shape[d];
    layout.strides[d] = reduced[d] ? 0 : stride;
    if (!reduced[d]) stride *= x_shape[d];
  }
  if (g.device().is_cuda()) {
    kernels::broadcast_cuda(g.data<float>(), layout, static_cast<float>(scale), dx.data<float>());
    return dx;
  }
  detail::dispatch_floating(g.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    kernels::broadcast_cpu<T>(g.data<T>(), layout, static_cast<T>(scale), dx.data<T>());
  });
  return dx;
}

// scale * (sum of x over the dims flagged in `reduced`), returned with shape `out_shape`, which
// must hold as many elements as x's shape with the reduced dims set to 1 (keepdim or not, the
// row-major order is the same). Records `op` when autograd is on.
Tensor reduce_sum(const Tensor& x, const std::vector<bool>& reduced, const Shape& out_shape,
                  double scale, const char* op) {
  ENGINE_CHECK(x.dim() <= kernels::kMaxDims, op, ": at most ", kernels::kMaxDims,
               " dimensions are supported, got ", shape_str(x.shape()));
  Tensor current = x.contiguous();
  Shape current_shape = x.shape();

  // Runs [begin, end) of adjacent reduced dims; no run at all means a (scaled) copy.
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!reduced[d]) continue;
    if (!runs.empty() && runs.back().second == d) {
      runs.back().second = d + 1;
    } else {
      runs.push_back({d, d + 1});
    }
  }
  if (runs.empty()) runs.push_back({0, 0});

  Tensor out;
  for (size_t k = 0; k < runs.size(); ++k) {
    auto [begin, end] = runs[k];
    int64_t outer = 1, length = 1, inner = 1;
    for (int64_t d = 0; d < begin; ++d) outer *= current_shape[d];
    for (int64_t d = begin; d < end; ++d) length *= current_shape[d];
    for (int64_t d = end; d < x.dim(); ++d) inner *= current_shape[d];
    for (int64_t d = begin; d < end; ++d) current_shape[d] = 1;
    const bool last = k + 1 == runs.size();
    Tensor next = Tensor::empty(last ? out_shape : current_shape, x.dtype(), x.device());
    if (x.device().is_cuda()) {
      kernels::sum_axis_cuda(current.data<float>(), outer, length, inner,
                             static_cast<float>(last ? scale : 1.0), next.data<float>());
    } else {
      detail::dispatch_floating(x.dtype(), op, [&](auto zero) {
        using T = decltype(zero);
        kernels::sum_axis_cpu<T>(current.data<T>(), outer, length, inner,
                                 static_cast<T>(last ? scale : 1.0), next.data<T>());
      });
    }
    current = next;
    out = next;
  }

  if (!needs_tape({x})) return out;
  return record(op, {x}, out,
                [x_shape = x.shape(), reduced, scale, op](const Tensor& grad,
                                                          const std::vector<bool>& needs) {
                  return std::vector<Tensor>{
                      needs[0] ? broadcast_back(grad, x_shape, reduced, scale, op) : Tensor()};
                });
}

struct ReducedDims {
  std::vector<bool> reduced;  // one flag per dim of x
  Shape out_shape;
  int64_t count = 1;  // number of elements summed into each output element
};

ReducedDims reduced_dims(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim,
                         const char* op) {
  ReducedDims r;
  r.reduced.assign(x.dim(), false);
  for (int64_t dim : dims) {
    int64_t d = detail::normalize_dim(dim, x.dim(), op);
    ENGINE_CHECK(!r.reduced[d], op, ": dim ", dim, " is given twice for a tensor of shape ",
                 shape_str(x.shape()));
    r.reduced[d] = true;
    r.count *= x.shape()[d];
  }
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!r.reduced[d]) {
      r.out_shape.push_back(x.shape()[d]);
    } else if (keepdim) {
      r.out_shape.push_back(1);
    }
  }
  return r;
}

void check_float_input(const Tensor& x, const char* op) {
  detail::check_defined(x, op, "x");
  detail::check_floating(x, op, "x");
}

}  // namespace

Tensor sum(const Tensor& x) {
  check_float_input(x, "sum");
  return reduce_sum(x, std::vector<bool>(x.dim(), true), Shape{}, 1.0, "sum");
}

// An empty `dims` reduces nothing (NumPy's axis=()), unlike PyTorch, where it means all dims.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  check_float_input(x, "sum");
  ReducedDims r = reduced_dims(x, dims, keepdim, "sum");
  return reduce_sum(x, r.reduced, r.out_shape, 1.0, "sum");
}

Tensor mean(const Tensor& x) {
  check_float_input(x, "mean");
  return reduce_sum(x, std::vector<bool>(x.dim(), true), Shape{},
                    1.0 / static_cast<double>(x.numel()), "mean");
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  check_float_input(x, "mean");
  ReducedDims r = reduced_dims(x, dims, keepdim, "mean");
  return reduce_sum(x, r.reduced, r.out_shape, 1.0 / static_cast<double>(r.count), "mean");
}

// Declared with the binary ops (it is their backward); it is a sum, so it lives here.
Tensor sum_to_shape(const Tensor& grad, const Shape& shape) {
  check_float_input(grad, "sum_to_shape");
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  bool compatible = lead >= 0;
  std::vector<bool> reduced(grad.dim(), false);
  for (int64_t d = 0; compatible && d < grad.dim(); ++d) {
    if (d < lead) {
      reduced[d] = true;  // a leading dim the target does not have
    } else if (shape[d - lead] == 1) {
      reduced[d] = grad.shape()[d] != 1;
    } else {
      compatible = shape[d - lead] == grad.shape()[d];
    }
  }
  ENGINE_CHECK(compatible, "sum_to_shape: cannot sum a gradient of shape ", shape_str(grad.shape()),
               " to shape ", shape_str(shape), " (not a broadcast of it)");
  if (grad.shape() == shape) return grad;
  return reduce_sum(grad, reduced, shape, 1.0, "sum_to_shape");
}

// logsumexp along one dim: out = m + log(sum_r exp(x_r - m)), m = max_r x_r (no overflow).
// d out / d x_r = exp(x_r - out) = softmax(x)_r.
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim) {
  const char* op = "logsumexp";
  check_float_input(x, op);
  const int64_t d = detail::normalize_dim(dim, x.dim(), op);
  ReducedDims r = reduced_dims(x, {d}, keepdim, op);
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= x.shape()[k];
  for (int64_t k = d + 1; k < x.dim(); ++k) inner *= x.shape()[k];
  const int64_t length = x.shape()[d];
  ENGINE_CHECK(length > 0, op, ": cannot reduce the empty dim ", dim, " of shape ",
               shape_str(x.shape()));

  Tensor xc = x.contiguous();
  Tensor out = Tensor::empty(r.out_shape, x.dtype(), x.device());
  if (x.device().is_cuda()) {
    kernels::logsumexp_cuda(xc.data<float>(), outer, length, inner, out.data<float>());
  } else {
    detail::dispatch_floating(x.dtype(), op, [&](auto zero) {
      using T = decltype(zero);
      kernels::logsumexp_cpu<T>(xc.data<T>(), outer, length, inner, out.data<T>());
    });
  }
  if (!needs_tape({x})) return out;
  return record(
      op, {x}, out,
      [x_saved = xc.detach(), out_saved = out.detach(), outer, length, inner, op](
          const Tensor& grad, const std::vector<bool>& needs) {
        if (!needs[0]) return std::vector<Tensor>{Tensor()};
        Tensor g = grad.contiguous();
        Tensor dx = Tensor::empty(x_saved.shape(), g.dtype(), g.device());
        if (g.device().is_cuda()) {
          kernels::logsumexp_backward_cuda(x_saved.data<float>(), out_saved.data<float>(),
                                           g.data<float>(), outer, length, inner, dx.data<float>());
          return std::vector<Tensor>{dx};
        }
        detail::dispatch_floating(g.dtype(), op, [&](auto zero) {
          using T = decltype(zero);
          kernels::logsumexp_backward_cpu<T>(x_saved.data<T>(), out_saved.data<T>(), g.data<T>(),
                                             outer, length, inner, dx.data<T>());
        });
        return std::vector<Tensor>{dx};
      },
      {{"input", xc}, {"output", out}});
}

}  // namespace engine
