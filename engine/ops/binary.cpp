// add, sub, mul, div with NumPy broadcasting, and their backward.
//
// Broadcasting aligns shapes at the right; a dimension of size 1 (or a missing leading one) is
// repeated to match the other operand. The kernel sees the broadcast as stride 0, so neither
// operand is copied or expanded in memory. The backward of a broadcast is a sum over the repeated
// dimensions: sum_to_shape (engine/ops/reduce.cpp, next to the other sums).
#include "kernels/binary/binary.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops/op_utils.h"

namespace engine {
namespace {

using kernels::BinaryOp;
using kernels::StridedLayout;

const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "add";
    case BinaryOp::Sub:
      return "sub";
    case BinaryOp::Mul:
      return "mul";
    case BinaryOp::Div:
      return "div";
  }
  return "?";
}

// Layout of `t` read as if expanded to `out_shape`: its own strides, 0 where it is broadcast.
StridedLayout broadcast_layout(const Tensor& t, const Shape& out_shape) {
  StridedLayout layout;
  const int64_t ndim = static_cast<int64_t>(out_shape.size());
  const int64_t lead = ndim - t.dim();
  layout.ndim = static_cast<int>(ndim);
  for (int64_t d = 0; d < ndim; ++d) {
    layout.shape[d] = out_shape[d];
    const int64_t td = d - lead;
    const bool repeated = td < 0 || (t.shape()[td] == 1 && out_shape[d] != 1);
    layout.strides[d] = repeated ? 0 : t.strides()[td];
  }
  return layout;
}

// The forward of all four ops: validate, broadcast, allocate, run the kernel.
Tensor binary_forward(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  detail::check_defined(a, name, "a");
  detail::check_defined(b, name, "b");
  detail::check_floating(a, name, "a");
  detail::check_same_kind(a, b, name, "b");
  Shape out_shape = detail::broadcast_shapes(a.shape(), b.shape(), name);
  ENGINE_CHECK(out_shape.size() <= static_cast<size_t>(kernels::kMaxDims), name, ": at most ",
               kernels::kMaxDims, " dimensions are supported, got ", shape_str(out_shape));
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  if (a.device().is_cuda()) {
    kernels::binary_cuda(op, a.data<float>(), broadcast_layout(a, out_shape), b.data<float>(),
                         broadcast_layout(b, out_shape), out.data<float>(),
                         broadcast_layout(out, out_shape));
    return out;
  }
  detail::dispatch_floating(a.dtype(), name, [&](auto zero) {
    using T = decltype(zero);
    kernels::binary_cpu<T>(op, a.data<T>(), broadcast_layout(a, out_shape), b.data<T>(),
                           broadcast_layout(b, out_shape), out.data<T>(),
                           broadcast_layout(out, out_shape));
  });
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::Add, a, b);
  if (!needs_tape({a, b})) return out;
  // d(a+b)/da = d(a+b)/db = 1; each input gets the gradient summed over where it was repeated.
  return record("add", {a, b}, out,
                [a_shape = a.shape(), b_shape = b.shape()](const Tensor& grad,
                                                           const std::vector<bool>& needs) {
                  return std::vector<Tensor>{needs[0] ? sum_to_shape(grad, a_shape) : Tensor(),
                                             needs[1] ? sum_to_shape(grad, b_shape) : Tensor()};
                });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::Sub, a, b);
  if (!needs_tape({a, b})) return out;
  return record("sub", {a, b}, out,
                [a_shape = a.shape(), b_shape = b.shape()](const Tensor& grad,
                                                           const std::vector<bool>& needs) {
                  return std::vector<Tensor>{
                      needs[0] ? sum_to_shape(grad, a_shape) : Tensor(),
                      needs[1] ? neg(sum_to_shape(grad, b_shape)) : Tensor()};
                });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::Mul, a, b);
  if (!needs_tape({a, b})) return out;
  // d(ab)/da = b, d(ab)/db = a. Both operands are saved (detached): which gradients are wanted
  // is known only at backward time.
  return record("mul", {a, b}, out,
                [a_saved = a.detach(), b_saved = b.detach()](const Tensor& grad,
                                                             const std::vector<bool>& needs) {
                  return std::vector<Tensor>{
                      needs[0] ? sum_to_shape(mul(grad, b_saved), a_saved.shape()) : Tensor(),
                      needs[1] ? sum_to_shape(mul(grad, a_saved), b_saved.shape()) : Tensor()};
                },
                {{"a", a}, {"b", b}});
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::Div, a, b);
  if (!needs_tape({a, b})) return out;
  // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2 = -(a/b)/b, computed from the saved output.
  return record(
      "div", {a, b}, out,
      [a_shape = a.shape(), b_saved = b.detach(), out_saved = out.detach()](
          const Tensor& grad, const std::vector<bool>& needs) {
        Tensor grad_over_b = div(grad, b_saved);
        return std::vector<Tensor>{
            needs[0] ? sum_to_shape(grad_over_b, a_shape) : Tensor(),
            needs[1] ? neg(sum_to_shape(mul(grad_over_b, out_saved), b_saved.shape())) : Tensor()};
      },
      {{"divisor", b}, {"output", out}});
}

}  // namespace engine
