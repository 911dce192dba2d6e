// l2_normalize, CUDA, f32: rows of x [N, D] divided by max(||x_i||, eps), and the backward
// (math: l2_normalize.h).
//
//   forward   norm_i = sqrt(sum_d x_id^2),  y_i = x_i / max(norm_i, eps)
//   backward  norm_i >= eps:  dx_i = (dy_i - x_i <x_i, dy_i> / norm_i^2) / norm_i
//             norm_i <  eps:  dx_i = dy_i / eps
//   (the first is (I - y y^T) dy / norm with y = x / norm; it is evaluated as written so no
//   intermediate is a cube of the norm, which would overflow float for norms above ~7e12.)
// Layout:   x, y, dy, dx contiguous row-major [N, D]; norm [N] (written by the forward, read by
//           the backward).
// Parallel: one block per row (grid-stride over rows), 32-256 threads (a multiple of 32 no
//           larger than D needs). Threads stride over d (coalesced). The row's sum of squares
//           (forward) or <x, dy> (backward) is a block tree reduction: warp shuffles, one value
//           per warp through shared memory, one more warp-level tree; every thread gets it.
//           Whether a row takes the norm < eps branch depends only on the row, so the whole
//           block takes the same branch (no divergence around __syncthreads).
// Cost:     forward 3 N D FLOPs, reads x twice (the second time from L1/L2) and writes y:
//           floor 8 N D bytes / bandwidth; backward 5 N D FLOPs, reads x and dy twice, writes dx:
//           floor 12 N D bytes / bandwidth.
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduction.cuh"
#include "kernels/l2_normalize/l2_normalize.h"

namespace engine::kernels {
namespace {

__global__ void l2_normalize_forward_kernel(const float* x, int64_t N, int64_t D, float eps,
                                            float* y, float* norm) {
  __shared__ float scratch[kWarpSize];
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const float* row = x + i * D;
    float squares = 0.0f;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) squares += row[d] * row[d];
    const float n = sqrtf(block_sum(squares, scratch));
    if (threadIdx.x == 0) norm[i] = n;
    const float divisor = fmaxf(n, eps);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) y[i * D + d] = row[d] / divisor;
  }
}

__global__ void l2_normalize_backward_kernel(const float* dy, const float* x, const float* norm,
                                             int64_t N, int64_t D, float eps, float* dx) {
  __shared__ float scratch[kWarpSize];
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const float* x_row = x + i * D;
    const float* dy_row = dy + i * D;
    float* dx_row = dx + i * D;
    const float n = norm[i];
    if (n < eps) {  // the same for every thread of the block
      for (int64_t d = threadIdx.x; d < D; d += blockDim.x) dx_row[d] = dy_row[d] / eps;
      continue;
    }
    float dot = 0.0f;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) dot += x_row[d] * dy_row[d];
    // <x, dy> / n^2, as (dot / n) / n: neither step overflows for large norms.
    const float along = block_sum(dot, scratch) / n / n;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      dx_row[d] = (dy_row[d] - x_row[d] * along) / n;
    }
  }
}

}  // namespace

void l2_normalize_forward_cuda(const float* x, int64_t N, int64_t D, float eps, float* y,
                               float* norm) {
  if (N == 0) return;
  // A sum of squares (2 D) and a scale (D) per row; x read, y and the norms written.
  describe_next_launch({"l2_normalize_forward", 3.0 * double(N * D), 4.0 * double(2 * N * D + N)});
  l2_normalize_forward_kernel<<<grid_for_items(N), row_block_threads(D), 0, current_stream()>>>(
      x, N, D, eps, y, norm);
  CUDA_CHECK_LAUNCH("l2_normalize_forward_cuda x [", N, ", ", D, "]");
}

void l2_normalize_backward_cuda(const float* dy, const float* x, const float* norm, int64_t N,
                                int64_t D, float eps, float* dx) {
  if (N == 0 || D == 0) return;
  // A dot product (2 D) and dx = (dy - y (y . dy)) / norm (3 D) per row; dy, x, norms read.
  describe_next_launch({"l2_normalize_backward", 5.0 * double(N * D), 4.0 * double(3 * N * D + N)});
  l2_normalize_backward_kernel<<<grid_for_items(N), row_block_threads(D), 0, current_stream()>>>(
      dy, x, norm, N, D, eps, dx);
  CUDA_CHECK_LAUNCH("l2_normalize_backward_cuda x [", N, ", ", D, "]");
}

}  // namespace engine::kernels
