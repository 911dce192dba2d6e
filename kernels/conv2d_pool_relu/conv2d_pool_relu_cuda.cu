// conv2d_pool_relu on CUDA (f32): conv + bias, 2x2 / stride-2 max-pool and ReLU in one forward
// kernel writing y and the window index; and the backward's unpool.
//
// Math, layout, the backward's design and the byte counts at C2F2's shapes:
// conv2d_pool_relu.h. Device pointers, launched on current_stream(), no host synchronization.
//
// forward: one thread per pooled output o = (n, k, i, j), grid-stride, 256 threads per block.
//   The thread keeps 4 accumulators, the conv values z at (2i + a, 2j + b), a, b in {0, 1}, and
//   walks the taps (c, r, s) in ascending order: for each it reads w[k, c, r, s] once and the 4
//   x values (0 outside the image) and does acc = fmaf(x, w, acc) -- the FMA chain and order of
//   conv2d_fprop_cuda (whose GEMM multiplies padding taps by 0 too), then z = acc + b[k]. The
//   max uses pool_cuda.cu's scan order and comparison and the ReLU unary_cuda.cu's, so y and
//   window are bit for bit what conv2d_fprop_cuda, max_pool2d_forward_cuda and relu give.
//   Consecutive threads take consecutive (i, j) of one (n, k) plane: their x reads are nearby
//   (cached) and their w reads the same address (a broadcast).
//   FLOPs 2 N K P Q C R S (4 windows cells of C R S FMAs per thread); bytes: reads x (each
//   value by the ~R S / 4 threads whose windows cover it, from cache) and w, writes y and window:
//   floor 4 (N C H W + K C R S + K) + 5 N K P2 Q2.
// unpool: one thread per dz cell (grid-stride over N K P Q): dz = 0 + dy of its window if the
//   window routes to this cell, else 0. Reads dy and window once (each by 4 threads, cached),
//   writes dz once: 5 N K P2 Q2 + 4 N K P Q bytes, no FLOPs.
// Indexing is 32-bit inside a plane and 64-bit across the batch.
#include <cmath>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/conv2d_pool_relu/conv2d_pool_relu.h"

namespace engine::kernels {

namespace {

constexpr int kThreads = 256;

// Conv2dShape with the conv output and pooled sizes, as a kernel argument.
struct FusedGeometry {
  int64_t N;
  int C, H, W, K, R, S, sh, sw, ph, pw, dh, dw, P, Q, P2, Q2;
};

FusedGeometry fused_geometry(const Conv2dShape& s) {
  FusedGeometry g;
  g.N = s.N;
  g.C = int(s.C), g.H = int(s.H), g.W = int(s.W), g.K = int(s.K), g.R = int(s.R), g.S = int(s.S);
  g.sh = int(s.stride_h), g.sw = int(s.stride_w), g.ph = int(s.pad_h), g.pw = int(s.pad_w);
  g.dh = int(s.dilation_h), g.dw = int(s.dilation_w);
  g.P = int(s.out_h()), g.Q = int(s.out_w()), g.P2 = g.P / 2, g.Q2 = g.Q / 2;
  return g;
}

__global__ void conv2d_pool_relu_forward_kernel(FusedGeometry g, const float* __restrict__ x,
                                                const float* __restrict__ w,
                                                const float* __restrict__ bias,
                                                float* __restrict__ y,
                                                uint8_t* __restrict__ window) {
  const int64_t total = g.N * g.K * g.P2 * g.Q2;
  for (int64_t o = grid_thread_index(); o < total; o += grid_thread_count()) {
    const int64_t plane = o / (g.P2 * g.Q2);  // n K + k
    const int ij = int(o - plane * g.P2 * g.Q2);
    const int i = ij / g.Q2, j = ij % g.Q2;
    const int64_t n = plane / g.K;
    const int k = int(plane - n * g.K);
    const float* x_image = x + n * g.C * g.H * g.W;
    const float* w_filter = w + int64_t(k) * g.C * g.R * g.S;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int c = 0; c < g.C; ++c) {
      const float* x_channel = x_image + c * g.H * g.W;
      for (int r = 0; r < g.R; ++r) {
        for (int s = 0; s < g.S; ++s) {
          const float wv = w_filter[(c * g.R + r) * g.S + s];
#pragma unroll
          for (int cell = 0; cell < 4; ++cell) {
            const int p = 2 * i + cell / 2, q = 2 * j + cell % 2;
            const int h = p * g.sh - g.ph + r * g.dh, wc = q * g.sw - g.pw + s * g.dw;
            const bool inside = h >= 0 && h < g.H && wc >= 0 && wc < g.W;
            acc[cell] = fmaf(inside ? x_channel[h * g.W + wc] : 0.0f, wv, acc[cell]);
          }
        }
      }
    }
    // The pool's rule: the first maximal cell in row-major order; a NaN beats a number.
    int best = 0;
    float best_value = acc[0] + (bias != nullptr ? bias[k] : 0.0f);
    for (int cell = 1; cell < 4; ++cell) {
      const float v = acc[cell] + (bias != nullptr ? bias[k] : 0.0f);
      if (v > best_value || (isnan(v) && !isnan(best_value))) {
        best = cell;
        best_value = v;
      }
    }
    y[o] = best_value < 0.0f ? 0.0f : best_value;  // relu (NaN passes, as in unary_cuda.cu)
    window[o] = best_value > 0.0f ? static_cast<uint8_t>(best) : kNoGradient;  // relu'(m)
  }
}

__global__ void conv2d_pool_relu_unpool_kernel(FusedGeometry g, const float* __restrict__ dy,
                                               const uint8_t* __restrict__ window,
                                               float* __restrict__ dz) {
  const int64_t total = g.N * g.K * g.P * g.Q;
  for (int64_t e = grid_thread_index(); e < total; e += grid_thread_count()) {
    const int64_t plane = e / (g.P * g.Q);
    const int pq = int(e - plane * g.P * g.Q);
    const int p = pq / g.Q, q = pq % g.Q, i = p / 2, j = q / 2;
    float value = 0.0f;
    if (i < g.P2 && j < g.Q2) {
      const int64_t o = (plane * g.P2 + i) * g.Q2 + j;
      // 0 + dy: the pool's backward sums into 0, which turns -0 into +0.
      if (window[o] == 2 * (p % 2) + q % 2) value = 0.0f + dy[o];
    }
    dz[e] = value;
  }
}

}  // namespace

void conv2d_pool_relu_forward_cuda(const Conv2dShape& shape, const float* x, const float* w,
                                   const float* bias, float* y, uint8_t* window) {
  const FusedGeometry g = fused_geometry(shape);
  const int64_t total = g.N * g.K * g.P2 * g.Q2;
  if (total == 0) return;
  conv2d_pool_relu_forward_kernel<<<grid_for(total, kThreads), kThreads, 0, current_stream()>>>(
      g, x, w, bias, y, window);
  CUDA_CHECK_LAUNCH("conv2d_pool_relu_forward_cuda N=", shape.N, " C=", shape.C, " H=", shape.H,
                    " W=", shape.W, " K=", shape.K, " R=", shape.R, " S=", shape.S);
}

void conv2d_pool_relu_unpool_cuda(const Conv2dShape& shape, const float* dy, const uint8_t* window,
                                  float* dz) {
  const FusedGeometry g = fused_geometry(shape);
  const int64_t total = g.N * g.K * g.P * g.Q;
  if (total == 0) return;
  conv2d_pool_relu_unpool_kernel<<<grid_for(total, kThreads), kThreads, 0, current_stream()>>>(
      g, dy, window, dz);
  CUDA_CHECK_LAUNCH("conv2d_pool_relu_unpool_cuda N=", shape.N, " K=", shape.K,
                    " P=", shape.out_h(), " Q=", shape.out_w());
}

}  // namespace engine::kernels
