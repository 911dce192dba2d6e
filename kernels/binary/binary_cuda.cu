// binary, CUDA: out = a (op) b elementwise with NumPy broadcasting, f32 (math: binary.h).
//
// Layout:   a, b and out are each a StridedLayout over the output shape (stride 0 = the operand
//           is repeated along that dim; any other strides, e.g. views, work too). Before the
//           launch the host simplifies the three layouts together (collapse_dims below): size-1
//           dims are dropped, and a dim is merged into the one before it when that is possible
//           in all three layouts at once. A same-shape op becomes 1-D, x * scalar becomes 1-D
//           with b's stride 0, a bias add [N, C] + [C] stays 2-D.
// Parallel: one thread per output element, grid-stride loop, 256 threads per block.
//           1-D after collapsing: offset = i * stride per operand (no index arithmetic).
//           Otherwise: the flat output index f is split into a multi-index, last dim fastest
//           (i_d = f mod shape[d], f /= shape[d]), and each offset is sum_d i_d * strides[d].
//           Writes are coalesced (out is contiguous); reads are coalesced where the operand's
//           last stride is 1 and one broadcast address per warp where it is 0.
// Cost:     n = numel(out): n FLOPs; reads <= 8n bytes and writes 4n bytes (a broadcast operand
//           is mostly served from cache). Memory bound: floor ~12n bytes / DRAM bandwidth.
#include "kernels/binary/binary.h"
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"

namespace engine::kernels {
namespace {

constexpr int kThreads = 256;

__device__ inline float apply(BinaryOp op, float x, float y) {
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
  return 0.0f;
}

// After collapsing to at most one dim: element i of the output is at i * out_stride, its
// operands at i * a_stride and i * b_stride (a stride is 0 for a broadcast scalar).
__global__ void binary_linear_kernel(BinaryOp op, const float* a, int64_t a_stride, const float* b,
                                     int64_t b_stride, float* out, int64_t out_stride,
                                     int64_t total) {
  for (int64_t i = grid_thread_index(); i < total; i += grid_thread_count()) {
    out[i * out_stride] = apply(op, a[i * a_stride], b[i * b_stride]);
  }
}

// General case: 2..kMaxDims dims left after collapsing.
__global__ void binary_strided_kernel(BinaryOp op, const float* a, StridedLayout a_layout,
                                      const float* b, StridedLayout b_layout, float* out,
                                      StridedLayout out_layout, int64_t total) {
  for (int64_t flat = grid_thread_index(); flat < total; flat += grid_thread_count()) {
    int64_t rest = flat, a_offset = 0, b_offset = 0, out_offset = 0;
    for (int d = out_layout.ndim - 1; d >= 0; --d) {
      const int64_t i = rest % out_layout.shape[d];
      rest /= out_layout.shape[d];
      a_offset += i * a_layout.strides[d];
      b_offset += i * b_layout.strides[d];
      out_offset += i * out_layout.strides[d];
    }
    out[out_offset] = apply(op, a[a_offset], b[b_offset]);
  }
}

struct Layouts {
  StridedLayout a, b, out;
};

// Drops size-1 dims and merges dim d into the kept dim k before it when, for every layout,
// strides[k] == strides[d] * shape[d] (stepping once along k equals stepping across all of d).
// The merged dim has size shape[k] * shape[d] and the inner stride strides[d]. Element order
// (row-major over the output) is unchanged, so the flat index means the same thing after.
Layouts collapse_dims(const StridedLayout& a, const StridedLayout& b, const StridedLayout& out) {
  Layouts c;  // every ndim starts at 0
  for (int d = 0; d < out.ndim; ++d) {
    if (out.shape[d] == 1) continue;  // index 0 only: its strides never matter
    const int k = c.out.ndim - 1;
    const bool mergeable = k >= 0 && c.a.strides[k] == a.strides[d] * a.shape[d] &&
                           c.b.strides[k] == b.strides[d] * b.shape[d] &&
                           c.out.strides[k] == out.strides[d] * out.shape[d];
    if (mergeable) {
      c.a.shape[k] *= a.shape[d];
      c.b.shape[k] *= b.shape[d];
      c.out.shape[k] *= out.shape[d];
      c.a.strides[k] = a.strides[d];
      c.b.strides[k] = b.strides[d];
      c.out.strides[k] = out.strides[d];
      continue;
    }
    const int n = c.out.ndim;
    c.a.shape[n] = a.shape[d];
    c.b.shape[n] = b.shape[d];
    c.out.shape[n] = out.shape[d];
    c.a.strides[n] = a.strides[d];
    c.b.strides[n] = b.strides[d];
    c.out.strides[n] = out.strides[d];
    c.a.ndim = c.b.ndim = c.out.ndim = n + 1;
  }
  return c;
}

}  // namespace

void binary_cuda(BinaryOp op, const float* a, StridedLayout a_layout, const float* b,
                 StridedLayout b_layout, float* out, StridedLayout out_layout) {
  const int ndim = out_layout.ndim;
  ENGINE_CHECK(a_layout.ndim == ndim && b_layout.ndim == ndim,
               "binary_cuda: layouts must have the output's rank (a ", a_layout.ndim, ", b ",
               b_layout.ndim, ", out ", ndim, ")");
  int64_t total = 1;
  for (int d = 0; d < ndim; ++d) total *= out_layout.shape[d];
  if (total == 0) return;

  const Layouts c = collapse_dims(a_layout, b_layout, out_layout);
  const unsigned blocks = grid_for(total, kThreads);
  if (c.out.ndim <= 1) {
    // 0 dims left means a single element (every dim had size 1): strides are irrelevant.
    const bool one_dim = c.out.ndim == 1;
    binary_linear_kernel<<<blocks, kThreads, 0, current_stream()>>>(
        op, a, one_dim ? c.a.strides[0] : 0, b, one_dim ? c.b.strides[0] : 0, out,
        one_dim ? c.out.strides[0] : 0, total);
  } else {
    binary_strided_kernel<<<blocks, kThreads, 0, current_stream()>>>(op, a, c.a, b, c.b, out, c.out,
                                                                     total);
  }
  CUDA_CHECK_LAUNCH("binary_cuda op=", static_cast<int>(op), " n=", total, " dims=", ndim,
                    " (collapsed to ", c.out.ndim, ")");
}

}  // namespace engine::kernels
