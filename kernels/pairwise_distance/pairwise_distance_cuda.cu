// pairwise_distance, CUDA, f32: the DML distance matrix of a [N, D] against b [M, D], and its
// backward (math: pairwise_distance.h).
//
// Forward (distance_kernel). out is cut into 64 x 64 tiles (grid-stride over tiles, 256 threads
//   = 16 x 16, tx = tid % 16, ty = tid / 16). Thread (tx, ty) owns the 4 x 4 pairs
//   (i0 + ty + 16p, j0 + tx + 16q), p, q < 4 (strided rather than adjacent so the shared-memory
//   reads below are conflict-free). D is walked in chunks of 16: the block stages
//     a_tile[k][r] = a[i0 + r][k0 + k],  b_tile[k][c] = b[j0 + c][k0 + k]   (0 outside the arrays)
//   in shared memory (global reads: 16 consecutive floats per row; rows padded to 65 floats so
//   the transposing stores hit distinct banks), then every thread does, for each k, 4 + 4 shared
//   reads (a_tile[k][ty + 16p] is one broadcast address per half-warp, b_tile[k][tx + 16q] 16
//   consecutive ones) and 16 updates:
//     (squared) Euclidean:  acc += (a - b)^2     -- differences, never |a|^2 + |b|^2 - 2<a, b>
//                                                   (no cancellation; exactly 0 for equal rows)
//     cosine:               acc += a b, and threads 0-63 / 64-127 also sum a_r^2 / b_c^2 of
//                           the staged rows, giving the 64 + 64 norms of the tile for free.
//   Zero padding contributes (0 - 0)^2 = 0 and 0 * 0 = 0, so ragged edges need no special case.
//   Epilogue: SquaredEuclidean acc; Euclidean sqrt(max(acc, 0)); cosine
//   1 - acc / (max(|a_i|, eps) max(|b_j|, eps)).
// Backward. Every metric's gradient is a sum over pairs with a coefficient matrix W [N, M]:
//   (squared) Euclidean, "difference form":
//     da_i = alpha sum_j W_ij (a_i - b_j),    db_j = alpha sum_i W_ij (b_j - a_i)
//     SquaredEuclidean: W = g (grad_out itself: no workspace), alpha = 2.
//     Euclidean:        W_ij = g_ij / dist_ij (0 where dist = 0: the subgradient that keeps the
//                       diagonal NaN-free), alpha = 1.
//     The differences are formed per term, as in the CPU reference, NOT split into
//     (sum_j W_ij) a_i - sum_j W_ij b_j: that split cancels when distances are small next to
//     |a| (relative error ~eps |a| / dist).
//   Cosine, "self form" (the formula of the .h, which has this shape itself):
//     da_i = sa_i a_i - sum_j W_ij b_j,       db_j = sb_j b_j - sum_i W_ij a_i
//     W_ij = g_ij / (r_a r_b), T_ij = W_ij <a_i, b_j> (= g_ij s_ij),
//     sa_i = [|a_i| >= eps] rowsum(T)_i / |a_i|^2, sb_j likewise with colsum(T).
//   Steps: (1) coefficient_kernel (not for SquaredEuclidean) recomputes the distance tiles
//   exactly as the forward and writes W (and for cosine T and the row norms) to a workspace;
//   (2) cosine only: self_rows_kernel (block per row, tree reduction) and self_columns_kernel
//   (thread per column, coalesced over rows) reduce T in a fixed order; (3) pair_gemm_kernel, a
//   64 x 64-tiled GEMM-like kernel with the forward's thread layout, contracts W (or W^T for
//   grad_b) with the other operand. Deterministic (no atomics). The workspace is stream-ordered
//   (cudaMallocAsync / cudaFreeAsync on the current stream): no host synchronization.
// Layout: a, b, grad_a, grad_b contiguous row-major [N, D] / [M, D]; out, grad_out [N, M].
// Cost: forward 3 N M D FLOPs ((squared) Euclidean) or 2 N M D + 2 (N + M) D (cosine), FMA
//   bound: each staged element is reused 64 times from shared memory; it must read (N + M) D
//   floats and write N M. Backward: 3 N M D to recompute (skipped for SquaredEuclidean) plus
//   3 N M D (difference form) or 2 N M D (cosine) per requested gradient; workspace traffic
//   4 N M (Euclidean) or 8 N M (cosine) bytes written and read back per gradient.
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/cuda_workspace.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduction.cuh"
#include "kernels/pairwise_distance/pairwise_distance.h"

namespace engine::kernels {
namespace {

constexpr int kTile = 64;   // output tile is kTile x kTile
constexpr int kChunk = 16;  // depth staged in shared memory per step
constexpr int kSide = 16;   // threads per tile side: 16 x 16
constexpr int kThreads = kSide * kSide;
constexpr int kMicro = kTile / kSide;  // 4 x 4 outputs per thread

using StageTile = float[kChunk][kTile + 1];  // [k][r]; +1 so transposing stores spread over banks

// Stages rows [row0, row0 + 64) x columns [k0, k0 + 16) of a row-major [rows, D] array as
// tile[k][r]. Element e of the 64 x 16 stage is r = e / 16, k = e % 16: a warp reads two rows'
// 16 consecutive floats (two 64-byte segments).
__device__ inline void stage_rows(const float* src, int64_t rows, int64_t D, int64_t row0,
                                  int64_t k0, StageTile& tile) {
  for (int e = threadIdx.x; e < kTile * kChunk; e += kThreads) {
    const int r = e / kChunk, k = e % kChunk;
    const int64_t row = row0 + r, col = k0 + k;
    tile[k][r] = (row < rows && col < D) ? src[row * D + col] : 0.0f;
  }
}

// The distance tile at (i0, j0): acc[p][q] for pair (i0 + ty + 16p, j0 + tx + 16q) gets
// sum_d (a_id - b_jd)^2, or <a_i, b_j> when `cosine`. For cosine, the squared norms of the tile's
// rows end in a_norm2[0..63] and b_norm2[0..63]. Ends with a __syncthreads.
__device__ inline void accumulate_tile(const float* a, const float* b, int64_t N, int64_t M,
                                       int64_t D, bool cosine, int64_t i0, int64_t j0,
                                       StageTile& a_tile, StageTile& b_tile, float* a_norm2,
                                       float* b_norm2, float (&acc)[kMicro][kMicro]) {
  const int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
  for (int p = 0; p < kMicro; ++p) {
    for (int q = 0; q < kMicro; ++q) acc[p][q] = 0.0f;
  }
  float norm2 = 0.0f;  // cosine: thread t < 64 sums row t of a_tile, 64 <= t < 128 row t-64 of b
  for (int64_t k0 = 0; k0 < D; k0 += kChunk) {
    stage_rows(a, N, D, i0, k0, a_tile);
    stage_rows(b, M, D, j0, k0, b_tile);
    __syncthreads();
    if (cosine) {
      if (threadIdx.x < kTile) {
        for (int k = 0; k < kChunk; ++k) norm2 += a_tile[k][threadIdx.x] * a_tile[k][threadIdx.x];
      } else if (threadIdx.x < 2 * kTile) {
        const int c = threadIdx.x - kTile;
        for (int k = 0; k < kChunk; ++k) norm2 += b_tile[k][c] * b_tile[k][c];
      }
      for (int k = 0; k < kChunk; ++k) {
        float av[kMicro], bv[kMicro];
        for (int p = 0; p < kMicro; ++p) av[p] = a_tile[k][ty + kSide * p];
        for (int q = 0; q < kMicro; ++q) bv[q] = b_tile[k][tx + kSide * q];
        for (int p = 0; p < kMicro; ++p) {
          for (int q = 0; q < kMicro; ++q) acc[p][q] = fmaf(av[p], bv[q], acc[p][q]);
        }
      }
    } else {
      for (int k = 0; k < kChunk; ++k) {
        float av[kMicro], bv[kMicro];
        for (int p = 0; p < kMicro; ++p) av[p] = a_tile[k][ty + kSide * p];
        for (int q = 0; q < kMicro; ++q) bv[q] = b_tile[k][tx + kSide * q];
        for (int p = 0; p < kMicro; ++p) {
          for (int q = 0; q < kMicro; ++q) {
            const float diff = av[p] - bv[q];
            acc[p][q] = fmaf(diff, diff, acc[p][q]);
          }
        }
      }
    }
    __syncthreads();  // the stage is overwritten by the next chunk
  }
  if (cosine) {
    if (threadIdx.x < kTile) {
      a_norm2[threadIdx.x] = norm2;
    } else if (threadIdx.x < 2 * kTile) {
      b_norm2[threadIdx.x - kTile] = norm2;
    }
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads)
    distance_kernel(const float* a, const float* b, int64_t N, int64_t M, int64_t D,
                    PairwiseMetric metric, float eps, float* out) {
  __shared__ StageTile a_tile, b_tile;
  __shared__ float a_norm2[kTile], b_norm2[kTile];
  const int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
  const bool cosine = metric == PairwiseMetric::Cosine;
  const int64_t col_tiles = (M + kTile - 1) / kTile;
  const int64_t tiles = (N + kTile - 1) / kTile * col_tiles;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t i0 = tile / col_tiles * kTile, j0 = tile % col_tiles * kTile;
    float acc[kMicro][kMicro];
    accumulate_tile(a, b, N, M, D, cosine, i0, j0, a_tile, b_tile, a_norm2, b_norm2, acc);
    for (int p = 0; p < kMicro; ++p) {
      for (int q = 0; q < kMicro; ++q) {
        const int r = ty + kSide * p, c = tx + kSide * q;
        const int64_t i = i0 + r, j = j0 + c;
        if (i >= N || j >= M) continue;
        float value = acc[p][q];
        if (metric == PairwiseMetric::Euclidean) {
          value = sqrtf(fmaxf(value, 0.0f));
        } else if (cosine) {
          value = 1.0f - value / (fmaxf(sqrtf(a_norm2[r]), eps) * fmaxf(sqrtf(b_norm2[c]), eps));
        }
        out[i * M + j] = value;
      }
    }
    __syncthreads();  // a_norm2 / b_norm2 are read above before the next tile rewrites them
  }
}

// Backward step 1 (Euclidean, cosine): W (and for cosine T and the row norms) from the
// recomputed distance tiles. Norms are written by the tiles of the first tile column (a) and
// first tile row (b); every tile computes the same values, so which one writes does not matter.
__global__ void __launch_bounds__(kThreads)
    coefficient_kernel(const float* grad_out, const float* a, const float* b, int64_t N, int64_t M,
                       int64_t D, PairwiseMetric metric, float eps, float* W, float* T,
                       float* norm_a, float* norm_b) {
  __shared__ StageTile a_tile, b_tile;
  __shared__ float a_norm2[kTile], b_norm2[kTile];
  const int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
  const bool cosine = metric == PairwiseMetric::Cosine;
  const int64_t col_tiles = (M + kTile - 1) / kTile;
  const int64_t tiles = (N + kTile - 1) / kTile * col_tiles;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t i0 = tile / col_tiles * kTile, j0 = tile % col_tiles * kTile;
    float acc[kMicro][kMicro];
    accumulate_tile(a, b, N, M, D, cosine, i0, j0, a_tile, b_tile, a_norm2, b_norm2, acc);
    if (cosine && j0 == 0 && threadIdx.x < kTile && i0 + threadIdx.x < N) {
      norm_a[i0 + threadIdx.x] = sqrtf(a_norm2[threadIdx.x]);
    }
    if (cosine && i0 == 0 && threadIdx.x < kTile && j0 + threadIdx.x < M) {
      norm_b[j0 + threadIdx.x] = sqrtf(b_norm2[threadIdx.x]);
    }
    for (int p = 0; p < kMicro; ++p) {
      for (int q = 0; q < kMicro; ++q) {
        const int r = ty + kSide * p, c = tx + kSide * q;
        const int64_t i = i0 + r, j = j0 + c;
        if (i >= N || j >= M) continue;
        const float g = grad_out[i * M + j];
        if (cosine) {
          const float w = g / (fmaxf(sqrtf(a_norm2[r]), eps) * fmaxf(sqrtf(b_norm2[c]), eps));
          W[i * M + j] = w;
          T[i * M + j] = w * acc[p][q];
        } else {
          const float distance = sqrtf(fmaxf(acc[p][q], 0.0f));
          W[i * M + j] = distance > 0.0f ? g / distance : 0.0f;
        }
      }
    }
    __syncthreads();
  }
}

// Cosine self coefficient from a row/column sum S of T: [n >= eps] S / n^2, evaluated as
// S / n / n (no overflow of n^2 for huge norms).
__device__ inline float self_coefficient(float sum, const float* norms, int64_t index, float eps) {
  const float n = norms[index];
  return n >= eps ? sum / n / n : 0.0f;
}

// Backward step 2a (cosine): sa_i from the contiguous row i of T [N, M]: block per row, tree
// reduction.
__global__ void self_rows_kernel(const float* T, int64_t N, int64_t M, const float* norms,
                                 float eps, float* self) {
  __shared__ float scratch[kWarpSize];
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    float acc = 0.0f;
    for (int64_t j = threadIdx.x; j < M; j += blockDim.x) acc += T[i * M + j];
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) self[i] = self_coefficient(acc, norms, i, eps);
  }
}

// Backward step 2b (cosine): sb_j from column j of T: thread per column; the loop over i reads
// T[i * M + j] for consecutive j across a warp (coalesced).
__global__ void self_columns_kernel(const float* T, int64_t N, int64_t M, const float* norms,
                                    float eps, float* self) {
  for (int64_t j = grid_thread_index(); j < M; j += grid_thread_count()) {
    float acc = 0.0f;
    for (int64_t i = 0; i < N; ++i) acc += T[i * M + j];
    self[j] = self_coefficient(acc, norms, j, eps);
  }
}

// Backward step 3, for r < R, d < D, with Wop[r][k] = W[r * w_row_stride + k * w_k_stride]
// (W itself for grad_a, its transpose for grad_b):
//   self == nullptr (difference form): out[r][d] = alpha sum_{k < K} Wop[r][k] (X[r][d] - Y[k][d])
//   otherwise (self form):             out[r][d] = self[r] X[r][d] - sum_k Wop[r][k] Y[k][d]
// Tiles of 64 r x 64 d; thread (tx, ty) owns (r0 + ty + 16p, d0 + tx + 16q) and, in the
// difference form, keeps its 16 X values in registers for the whole tile. k is staged 16 at a
// time: w_tile[k][r] and y_tile[k][d].
__global__ void __launch_bounds__(kThreads)
    pair_gemm_kernel(const float* W, int64_t w_row_stride, int64_t w_k_stride, float alpha,
                     const float* self, const float* X, const float* Y, int64_t R, int64_t K,
                     int64_t D, float* out) {
  __shared__ StageTile w_tile, y_tile;
  const int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
  const bool difference = self == nullptr;
  const int64_t col_tiles = (D + kTile - 1) / kTile;
  const int64_t tiles = (R + kTile - 1) / kTile * col_tiles;
  // Stage W with the fast-varying index along whichever of r and k is contiguous in memory.
  const bool k_contiguous = w_k_stride == 1;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t r0 = tile / col_tiles * kTile, d0 = tile % col_tiles * kTile;
    float acc[kMicro][kMicro];
    float xv[kMicro][kMicro];  // X[r][d] of the owned outputs (0 outside)
    for (int p = 0; p < kMicro; ++p) {
      for (int q = 0; q < kMicro; ++q) {
        const int64_t r = r0 + ty + kSide * p, d = d0 + tx + kSide * q;
        acc[p][q] = 0.0f;
        xv[p][q] = (r < R && d < D) ? X[r * D + d] : 0.0f;
      }
    }
    for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
      for (int e = threadIdx.x; e < kTile * kChunk; e += kThreads) {
        const int r = k_contiguous ? e / kChunk : e % kTile;
        const int k = k_contiguous ? e % kChunk : e / kTile;
        const int64_t row = r0 + r, kk = k0 + k;
        w_tile[k][r] = (row < R && kk < K) ? W[row * w_row_stride + kk * w_k_stride] : 0.0f;
      }
      // y_tile[k][d] = Y[k0 + k][d0 + d]: element e is k = e / 64, d = e % 64 (a warp reads 32
      // consecutive floats of one row of Y).
      for (int e = threadIdx.x; e < kTile * kChunk; e += kThreads) {
        const int k = e / kTile, d = e % kTile;
        const int64_t kk = k0 + k, col = d0 + d;
        y_tile[k][d] = (kk < K && col < D) ? Y[kk * D + col] : 0.0f;
      }
      __syncthreads();
      // Padded k (beyond K) has w = 0, so it adds nothing in either form.
      for (int k = 0; k < kChunk; ++k) {
        float wv[kMicro], yv[kMicro];
        for (int p = 0; p < kMicro; ++p) wv[p] = w_tile[k][ty + kSide * p];
        for (int q = 0; q < kMicro; ++q) yv[q] = y_tile[k][tx + kSide * q];
        if (difference) {
          for (int p = 0; p < kMicro; ++p) {
            for (int q = 0; q < kMicro; ++q) {
              acc[p][q] = fmaf(wv[p], xv[p][q] - yv[q], acc[p][q]);
            }
          }
        } else {
          for (int p = 0; p < kMicro; ++p) {
            for (int q = 0; q < kMicro; ++q) acc[p][q] = fmaf(wv[p], yv[q], acc[p][q]);
          }
        }
      }
      __syncthreads();
    }
    for (int p = 0; p < kMicro; ++p) {
      for (int q = 0; q < kMicro; ++q) {
        const int64_t r = r0 + ty + kSide * p, d = d0 + tx + kSide * q;
        if (r >= R || d >= D) continue;
        out[r * D + d] = difference ? alpha * acc[p][q] : self[r] * xv[p][q] - acc[p][q];
      }
    }
  }
}

unsigned grid_for_tiles(int64_t rows, int64_t cols) {
  return grid_for_items(ceil_div(rows, kTile) * ceil_div(cols, kTile));
}

}  // namespace

void pairwise_distance_forward_cuda(const float* a, const float* b, int64_t N, int64_t M, int64_t D,
                                    PairwiseMetric metric, float eps, float* out) {
  if (N == 0 || M == 0) return;
  // One multiply-add per pair and coordinate (the GEMM of a and b); a, b read, out written.
  describe_next_launch(
      {"pairwise_distance", 2.0 * double(N * M * D), 4.0 * double(N * D + M * D + N * M)});
  distance_kernel<<<grid_for_tiles(N, M), kThreads, 0, current_stream()>>>(a, b, N, M, D, metric,
                                                                           eps, out);
  CUDA_CHECK_LAUNCH("pairwise_distance_forward_cuda a [", N, ", ", D, "] b [", M, ", ", D,
                    "] metric=", static_cast<int>(metric));
}

void pairwise_distance_backward_cuda(const float* grad_out, const float* a, const float* b,
                                     int64_t N, int64_t M, int64_t D, PairwiseMetric metric,
                                     float eps, float* grad_a, float* grad_b) {
  if ((grad_a == nullptr && grad_b == nullptr) || D == 0) return;
  cudaStream_t stream = current_stream();
  if (N == 0 || M == 0) {
    // No pairs: every gradient is an empty sum.
    if (grad_a)
      CUDA_CHECK(cudaMemsetAsync(grad_a, 0, N * D * sizeof(float), stream),
                 "pairwise_distance_backward_cuda zero grad_a");
    if (grad_b)
      CUDA_CHECK(cudaMemsetAsync(grad_b, 0, M * D * sizeof(float), stream),
                 "pairwise_distance_backward_cuda zero grad_b");
    return;
  }
  const bool squared = metric == PairwiseMetric::SquaredEuclidean;
  const bool cosine = metric == PairwiseMetric::Cosine;

  // Workspace, in floats: [W: N M, not for SquaredEuclidean]
  //                       [cosine: T: N M][norm_a: N][norm_b: M][sa: N][sb: M].
  const int64_t pairs = N * M;
  const int64_t floats = (squared ? 0 : pairs) + (cosine ? pairs + 2 * (N + M) : 0);
  StreamWorkspace workspace_memory(static_cast<std::size_t>(floats) * sizeof(float), stream,
                                   "pairwise_distance_backward_cuda");
  float* workspace = reinterpret_cast<float*>(workspace_memory.bytes());
  float* W = squared ? nullptr : workspace;
  float* T = cosine ? workspace + pairs : nullptr;
  float* norm_a = cosine ? T + pairs : nullptr;
  float* norm_b = cosine ? norm_a + N : nullptr;
  float* self_a = cosine ? norm_b + M : nullptr;  // null selects the difference form
  float* self_b = cosine ? self_a + N : nullptr;
  const float* coefficients = squared ? grad_out : W;
  const float alpha = squared ? 2.0f : 1.0f;  // unused by the self form (cosine)

  if (!squared) {
    coefficient_kernel<<<grid_for_tiles(N, M), kThreads, 0, stream>>>(
        grad_out, a, b, N, M, D, metric, eps, W, T, norm_a, norm_b);
    CUDA_CHECK_LAUNCH("pairwise_distance_backward_cuda coefficients a [", N, ", ", D, "] b [", M,
                      ", ", D, "] metric=", static_cast<int>(metric));
  }
  if (grad_a) {
    if (cosine) {
      self_rows_kernel<<<grid_for_items(N), row_block_threads(M), 0, stream>>>(T, N, M, norm_a, eps,
                                                                               self_a);
      CUDA_CHECK_LAUNCH("pairwise_distance_backward_cuda row sums [", N, ", ", M, "]");
    }
    pair_gemm_kernel<<<grid_for_tiles(N, D), kThreads, 0, stream>>>(coefficients, M, 1, alpha,
                                                                    self_a, a, b, N, M, D, grad_a);
    CUDA_CHECK_LAUNCH("pairwise_distance_backward_cuda grad_a [", N, ", ", D, "] over M=", M,
                      " metric=", static_cast<int>(metric));
  }
  if (grad_b) {
    if (cosine) {
      self_columns_kernel<<<grid_for(M, kThreads), kThreads, 0, stream>>>(T, N, M, norm_b, eps,
                                                                          self_b);
      CUDA_CHECK_LAUNCH("pairwise_distance_backward_cuda column sums [", N, ", ", M, "]");
    }
    pair_gemm_kernel<<<grid_for_tiles(M, D), kThreads, 0, stream>>>(coefficients, 1, M, alpha,
                                                                    self_b, b, a, M, N, D, grad_b);
    CUDA_CHECK_LAUNCH("pairwise_distance_backward_cuda grad_b [", M, ", ", D, "] over N=", N,
                      " metric=", static_cast<int>(metric));
  }
  workspace_memory.release("pairwise_distance_backward_cuda workspace free");
}

}  // namespace engine::kernels
