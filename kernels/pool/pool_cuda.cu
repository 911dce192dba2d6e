// Pooling on CUDA: max, average and global average, forward and backward (f32).
//
// Math:     pool.h (first-max routing with NaN propagation; count_include_pad averages).
// Layout:   x, dx [N, C, H, W]; y, dy [N, C, P, Q]; contiguous, device pointers.
// Parallel: one thread per OUTPUT element for the forwards and one thread per INPUT element for
//           the backwards (grid-stride loops, 256 threads per block). The backwards are gathers:
//           each input cell visits the windows that contain it, p in
//           [ceil((h + ph - kh + 1) / sh), floor((h + ph) / sh)] and likewise for q, in row-major
//           (p, q) order, and sums what those windows send it. No atomics, no zeroing pass, and
//           the sums are added in the same order as the CPU reference's scatter loop, so results
//           are deterministic and match it bit for bit. max backward recomputes each window's
//           argmax from x with the reference's scan order and comparison.
//           Global average pool: one thread per (n, c) plane summing it in order (the planes of
//           the models are at most 7 x 7 by then; a huge plane would want a block reduction).
// Cost:     forward: N C P Q kh kw compares/adds; reads N C H W (each cell about kh kw / (sh sw)
//           times, from cache), writes N C P Q floats: floor 4 (N C H W + N C P Q) bytes.
//           max backward: every cell rescans the ~ceil(kh/sh) ceil(kw/sw) windows covering it
//           (kh kw reads each, cached); floor 4 (2 N C H W + N C P Q) bytes (x, dy, dx).
//           avg backward: floor 4 (N C H W + N C P Q). Global: reads N C H W, writes N C.
#include <cmath>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/pool/pool.h"

namespace engine::kernels {

namespace {

constexpr int kThreads = 256;

// Pool2dShape with the output size, as a kernel argument.
struct PoolGeometry {
  int64_t N, C, H, W, P, Q;
  int64_t kh, kw, sh, sw, ph, pw;
};

PoolGeometry pool_geometry(const Pool2dShape& s) {
  return PoolGeometry{s.N,        s.C,        s.H,        s.W,        s.out_h(), s.out_w(),
                      s.kernel_h, s.kernel_w, s.stride_h, s.stride_w, s.pad_h,   s.pad_w};
}

// Plane index (ih W + iw) of the first maximal in-image cell of window (p, q), or -1 if the
// window holds no in-image cell. Same scan order and comparison as the CPU reference.
__device__ int64_t window_argmax(const PoolGeometry& g, const float* plane, int64_t p, int64_t q) {
  int64_t best = -1;
  float best_value = 0.0f;
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t ih = p * g.sh - g.ph + i;
    if (ih < 0 || ih >= g.H) continue;
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t iw = q * g.sw - g.pw + j;
      if (iw < 0 || iw >= g.W) continue;
      const float v = plane[ih * g.W + iw];
      if (best < 0 || v > best_value || (isnan(v) && !isnan(best_value))) {
        best = ih * g.W + iw;
        best_value = v;
      }
    }
  }
  return best;
}

// The windows (along one axis) containing input index h: [first, last], possibly empty.
struct WindowRange {
  int64_t first, last;
};

__device__ WindowRange windows_containing(int64_t h, int64_t pad, int64_t kernel, int64_t stride,
                                          int64_t outputs) {
  const int64_t low = h + pad - kernel + 1;  // window p starts at p stride - pad <= h ...
  WindowRange range;
  range.first = low <= 0 ? 0 : (low + stride - 1) / stride;  // ... and ends past h
  const int64_t last = (h + pad) / stride;
  range.last = last < outputs - 1 ? last : outputs - 1;
  return range;
}

__global__ void max_pool_forward_kernel(PoolGeometry g, const float* __restrict__ x,
                                        float* __restrict__ y) {
  const int64_t total = g.N * g.C * g.P * g.Q;
  for (int64_t o = grid_thread_index(); o < total; o += grid_thread_count()) {
    const int64_t plane = o / (g.P * g.Q), pq = o % (g.P * g.Q);
    const float* in = x + plane * g.H * g.W;
    const int64_t best = window_argmax(g, in, pq / g.Q, pq % g.Q);
    y[o] = best >= 0 ? in[best] : -INFINITY;
  }
}

__global__ void max_pool_backward_kernel(PoolGeometry g, const float* __restrict__ x,
                                         const float* __restrict__ dy, float* __restrict__ dx) {
  const int64_t total = g.N * g.C * g.H * g.W;
  for (int64_t e = grid_thread_index(); e < total; e += grid_thread_count()) {
    const int64_t plane = e / (g.H * g.W), cell = e % (g.H * g.W);
    const int64_t h = cell / g.W, w = cell % g.W;
    const float* in = x + plane * g.H * g.W;
    const float* grad_out = dy + plane * g.P * g.Q;
    const WindowRange rows = windows_containing(h, g.ph, g.kh, g.sh, g.P);
    const WindowRange cols = windows_containing(w, g.pw, g.kw, g.sw, g.Q);
    float sum = 0.0f;
    for (int64_t p = rows.first; p <= rows.last; ++p) {
      for (int64_t q = cols.first; q <= cols.last; ++q) {
        if (window_argmax(g, in, p, q) == cell) sum += grad_out[p * g.Q + q];
      }
    }
    dx[e] = sum;
  }
}

__global__ void avg_pool_forward_kernel(PoolGeometry g, const float* __restrict__ x,
                                        float* __restrict__ y) {
  const int64_t total = g.N * g.C * g.P * g.Q;
  const float divisor = static_cast<float>(g.kh * g.kw);
  for (int64_t o = grid_thread_index(); o < total; o += grid_thread_count()) {
    const int64_t plane = o / (g.P * g.Q), pq = o % (g.P * g.Q);
    const int64_t p = pq / g.Q, q = pq % g.Q;
    const float* in = x + plane * g.H * g.W;
    float sum = 0.0f;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t ih = p * g.sh - g.ph + i;
      if (ih < 0 || ih >= g.H) continue;  // padding: zeros
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t iw = q * g.sw - g.pw + j;
        if (iw >= 0 && iw < g.W) sum += in[ih * g.W + iw];
      }
    }
    y[o] = sum / divisor;
  }
}

__global__ void avg_pool_backward_kernel(PoolGeometry g, const float* __restrict__ dy,
                                         float* __restrict__ dx) {
  const int64_t total = g.N * g.C * g.H * g.W;
  const float divisor = static_cast<float>(g.kh * g.kw);
  for (int64_t e = grid_thread_index(); e < total; e += grid_thread_count()) {
    const int64_t plane = e / (g.H * g.W), cell = e % (g.H * g.W);
    const float* grad_out = dy + plane * g.P * g.Q;
    const WindowRange rows = windows_containing(cell / g.W, g.ph, g.kh, g.sh, g.P);
    const WindowRange cols = windows_containing(cell % g.W, g.pw, g.kw, g.sw, g.Q);
    float sum = 0.0f;
    for (int64_t p = rows.first; p <= rows.last; ++p) {
      for (int64_t q = cols.first; q <= cols.last; ++q) sum += grad_out[p * g.Q + q] / divisor;
    }
    dx[e] = sum;
  }
}

__global__ void global_avg_forward_kernel(int64_t planes, int64_t plane_size,
                                          const float* __restrict__ x, float* __restrict__ y) {
  for (int64_t plane = grid_thread_index(); plane < planes; plane += grid_thread_count()) {
    const float* in = x + plane * plane_size;
    float sum = 0.0f;
    for (int64_t i = 0; i < plane_size; ++i) sum += in[i];
    y[plane] = sum / static_cast<float>(plane_size);
  }
}

__global__ void global_avg_backward_kernel(int64_t planes, int64_t plane_size,
                                           const float* __restrict__ dy, float* __restrict__ dx) {
  const int64_t total = planes * plane_size;
  for (int64_t e = grid_thread_index(); e < total; e += grid_thread_count()) {
    dx[e] = dy[e / plane_size] / static_cast<float>(plane_size);
  }
}

}  // namespace

void max_pool2d_forward_cuda(const Pool2dShape& shape, const float* x, float* y) {
  const PoolGeometry g = pool_geometry(shape);
  const int64_t total = g.N * g.C * g.P * g.Q;
  if (total == 0) return;
  // Comparisons, not FLOPs; x read and y written once.
  describe_next_launch({"max_pool2d_forward", -1.0, 4.0 * double(g.N * g.C * g.H * g.W + total)});
  max_pool_forward_kernel<<<grid_for(total, kThreads), kThreads, 0, current_stream()>>>(g, x, y);
  CUDA_CHECK_LAUNCH("max_pool2d_forward_cuda N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W,
                    " kernel=", g.kh, "x", g.kw);
}

void max_pool2d_backward_cuda(const Pool2dShape& shape, const float* x, const float* dy,
                              float* dx) {
  const PoolGeometry g = pool_geometry(shape);
  const int64_t total = g.N * g.C * g.H * g.W;
  if (total == 0) return;
  // x and dy read, dx written.
  describe_next_launch(
      {"max_pool2d_backward", -1.0, 4.0 * double(2 * total + g.N * g.C * g.P * g.Q)});
  max_pool_backward_kernel<<<grid_for(total, kThreads), kThreads, 0, current_stream()>>>(g, x, dy,
                                                                                         dx);
  CUDA_CHECK_LAUNCH("max_pool2d_backward_cuda N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W,
                    " kernel=", g.kh, "x", g.kw);
}

void avg_pool2d_forward_cuda(const Pool2dShape& shape, const float* x, float* y) {
  const PoolGeometry g = pool_geometry(shape);
  const int64_t total = g.N * g.C * g.P * g.Q;
  if (total == 0) return;
  avg_pool_forward_kernel<<<grid_for(total, kThreads), kThreads, 0, current_stream()>>>(g, x, y);
  CUDA_CHECK_LAUNCH("avg_pool2d_forward_cuda N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W,
                    " kernel=", g.kh, "x", g.kw);
}

void avg_pool2d_backward_cuda(const Pool2dShape& shape, const float* dy, float* dx) {
  const PoolGeometry g = pool_geometry(shape);
  const int64_t total = g.N * g.C * g.H * g.W;
  if (total == 0) return;
  avg_pool_backward_kernel<<<grid_for(total, kThreads), kThreads, 0, current_stream()>>>(g, dy, dx);
  CUDA_CHECK_LAUNCH("avg_pool2d_backward_cuda N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W,
                    " kernel=", g.kh, "x", g.kw);
}

void adaptive_avg_pool2d_forward_cuda(int64_t planes, int64_t plane_size, const float* x,
                                      float* y) {
  if (planes == 0) return;
  global_avg_forward_kernel<<<grid_for(planes, kThreads), kThreads, 0, current_stream()>>>(
      planes, plane_size, x, y);
  CUDA_CHECK_LAUNCH("adaptive_avg_pool2d_forward_cuda planes=", planes, " plane_size=", plane_size);
}

void adaptive_avg_pool2d_backward_cuda(int64_t planes, int64_t plane_size, const float* dy,
                                       float* dx) {
  const int64_t total = planes * plane_size;
  if (total == 0) return;
  global_avg_backward_kernel<<<grid_for(total, kThreads), kThreads, 0, current_stream()>>>(
      planes, plane_size, dy, dx);
  CUDA_CHECK_LAUNCH("adaptive_avg_pool2d_backward_cuda planes=", planes,
                    " plane_size=", plane_size);
}

}  // namespace engine::kernels
