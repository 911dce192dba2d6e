// 2-D pooling, NCHW: every (n, c) plane is pooled on its own.
//
//   x [N, C, H, W] -> y [N, C, P, Q], P = out_h(), Q = out_w() (floor: windows never start in
//   the bottom/right padding)
//   window(p, q) = rows p*sh - ph + [0, kh), columns q*sw - pw + [0, kw)
//
//   max:   y[n,c,p,q] = max of x over the window's cells inside the image (padding is -inf).
//          Backward routes dy[n,c,p,q] to the FIRST maximal cell in row-major window order
//          (ties: the top-left one; a NaN counts as the maximum, so NaN propagates). The backward
//          RECOMPUTES that cell from x (no index tensor is saved): the forward and the backward
//          scan the window in the same order with the same comparison, so they agree.
//   avg:   y[n,c,p,q] = (sum of x over the window's cells inside the image) / (kh kw).
//          count_include_pad = true: padded cells count as zeros in the divisor. With pad <= k/2
//          and floor-mode output sizes, a window never reaches past the padding, so the divisor
//          is always kh kw (PyTorch's divisor, clipped to the padded input, is the same).
//          Backward: dx[cell] += dy[n,c,p,q] / (kh kw) for every window containing the cell.
//   adaptive avg to 1x1 (global average pool): y[n,c] = mean of x[n,c,:,:]; dx = dy / (H W).
//
// All outputs are overwritten (backward kernels zero dx first). Callers validate the geometry
// (engine/ops/pool.cpp): kernel >= 1, stride >= 1, 0 <= pad <= kernel/2, out_h(), out_w() >= 1.
#pragma once

#include <cstdint>

namespace engine::kernels {

struct Pool2dShape {
  int64_t N = 0, C = 0, H = 0, W = 0;
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;

  int64_t out_h() const { return (H + 2 * pad_h - kernel_h) / stride_h + 1; }
  int64_t out_w() const { return (W + 2 * pad_w - kernel_w) / stride_w + 1; }
};

template <typename T>
void max_pool2d_forward_cpu(const Pool2dShape& shape, const T* x, T* y);
// dx from dy, recomputing each window's argmax from x.
template <typename T>
void max_pool2d_backward_cpu(const Pool2dShape& shape, const T* x, const T* dy, T* dx);

// The same two functions, bit for bit, with a fast path for the 2x2 / stride 2 / no padding
// case (C2F2's pools; every other geometry runs the reference above): one pass over each pair of
// input rows, branch-free selects the compiler vectorizes, and a backward that writes every dx
// cell once instead of zeroing dx and scattering into it. The engine uses these on the CPU.
template <typename T>
void max_pool2d_forward_fast_cpu(const Pool2dShape& shape, const T* x, T* y);
template <typename T>
void max_pool2d_backward_fast_cpu(const Pool2dShape& shape, const T* x, const T* dy, T* dx);
// Whether the fast functions take their fast path for `shape` (else they call the reference).
bool max_pool2d_has_fast_path(const Pool2dShape& shape);

template <typename T>
void avg_pool2d_forward_cpu(const Pool2dShape& shape, const T* x, T* y);
template <typename T>
void avg_pool2d_backward_cpu(const Pool2dShape& shape, const T* dy, T* dx);

// `planes` = N C planes of `plane_size` = H W elements each; y and dy hold one value per plane.
template <typename T>
void adaptive_avg_pool2d_forward_cpu(int64_t planes, int64_t plane_size, const T* x, T* y);
template <typename T>
void adaptive_avg_pool2d_backward_cpu(int64_t planes, int64_t plane_size, const T* dy, T* dx);

// ---- CUDA (pool_cuda.cu): f32, device pointers, same contracts; the backwards are gathers (one
// thread per input cell, no atomics) and match the reference's summation order ----
void max_pool2d_forward_cuda(const Pool2dShape& shape, const float* x, float* y);
void max_pool2d_backward_cuda(const Pool2dShape& shape, const float* x, const float* dy, float* dx);
void avg_pool2d_forward_cuda(const Pool2dShape& shape, const float* x, float* y);
void avg_pool2d_backward_cuda(const Pool2dShape& shape, const float* dy, float* dx);
void adaptive_avg_pool2d_forward_cuda(int64_t planes, int64_t plane_size, const float* x, float* y);
void adaptive_avg_pool2d_backward_cuda(int64_t planes, int64_t plane_size, const float* dy,
                                       float* dx);

}  // namespace engine::kernels
