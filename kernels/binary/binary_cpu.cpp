// binary, CPU reference: out[i] = a[i] (op) b[i] over strided (possibly broadcast) layouts.
// Plain single-threaded loops, one pass over the output (layout and cost: binary.h).
#include "kernels/binary/binary.h"

#include "kernels/common/check.h"
#include "kernels/common/instantiate.h"

namespace engine::kernels {
namespace {

template <typename T>
T apply(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::Add:
      return x + y;
    case BinaryOp::Sub:
      return x - y;
    case BinaryOp::Mul:
      return x * y;
    case BinaryOp::Div:
      return x / y;
  }
  return T(0);
}

}  // namespace

template <typename T>
void binary_cpu(BinaryOp op, const T* a, StridedLayout a_layout, const T* b, StridedLayout b_layout,
                T* out, StridedLayout out_layout) {
  const int ndim = out_layout.ndim;
  ENGINE_CHECK(a_layout.ndim == ndim && b_layout.ndim == ndim,
               "binary_cpu: layouts must have the output's rank");
  int64_t total = 1;
  for (int d = 0; d < ndim; ++d) total *= out_layout.shape[d];

  // Walk the output in row-major order, keeping the three element offsets in step with the
  // multi-index instead of recomputing them from scratch for every element.
  int64_t index[kMaxDims] = {};
  int64_t a_offset = 0, b_offset = 0, out_offset = 0;
  for (int64_t flat = 0; flat < total; ++flat) {
    out[out_offset] = apply(op, a[a_offset], b[b_offset]);
    for (int d = ndim - 1; d >= 0; --d) {
      ++index[d];
      a_offset += a_layout.strides[d];
      b_offset += b_layout.strides[d];
      out_offset += out_layout.strides[d];
      if (index[d] < out_layout.shape[d]) break;
      // Wrap this dimension back to 0 and carry into the next slower one.
      a_offset -= index[d] * a_layout.strides[d];
      b_offset -= index[d] * b_layout.strides[d];
      out_offset -= index[d] * out_layout.strides[d];
      index[d] = 0;
    }
  }
}

ENGINE_INSTANTIATE_FLOATING(binary_cpu);

}  // namespace engine::kernels
