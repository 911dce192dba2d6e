// matmul on CUDA: our own tiled SGEMM (strict FP32, FFMA) plus linear's bias add and bias
// gradient.
//
// Math:    C[i, j] (+)= sum_p op(A)[i, p] op(B)[p, j] (matmul.h); row-major buffers with no
//          padding; a transposed operand is read in place.
// Tiles:   the SGEMM tile shared with conv2d (kernels/common/gemm_tile.cuh): block tile 128
//          (rows of C) x 128 (columns) x 8 (p), 256 threads, an 8 x 8 register tile per thread,
//          A and B tiles double-buffered in shared memory (16.5 KiB per block). Registers ~128
//          per thread (64 accumulators, 16 fragments, 8 staged loads; __launch_bounds__(256, 2)).
// Loads:   each operand is read either along p (A untransposed, B transposed: 8 consecutive
//          floats per row) or along its rows (A^T, B untransposed: 128 consecutive floats), and
//          the thread-to-element mapping is chosen so consecutive threads read consecutive
//          addresses in both cases. Edges (M, N, K not multiples of the tile) read zeros and
//          skip the stores. Pipeline: the next tile goes global -> registers while the current
//          one is multiplied from shared memory; one __syncthreads per p step.
// Output:  lanes run along the columns of C (contiguous), 4 consecutive floats per thread.
// Cost:    2 m n k FLOPs; minimal bytes 4 (m k + k n + m n) (+ 4 m n more read when
//          accumulating). Indexing is 32-bit (each matrix < 2^31 elements, checked); a
//          workspace offset is 64-bit.
//
// Split-K: a small C with a long p (an attack's backward through its gallery distances,
//          dQ = dD X with m = 128 queries, n = 512, k = 10,000 gallery images) has only
//          ceil(m/128) ceil(n/128) = 4 tiles, so 4 blocks on a 132-SM GPU, each walking all of
//          p. matmul_cuda_splits picks `splits` contiguous chunks of p (blockIdx.z), aiming at
//          two blocks per SM while giving every chunk at least 64 steps of 8, at most 64 chunks
//          (that example: 19 chunks, 76 blocks). Each chunk writes its partial C to a workspace
//          [splits, m, n] and sum_gemm_splits_kernel adds the partials in chunk order (then C
//          when accumulating), so the result does not depend on scheduling: no atomics. Extra
//          traffic: 8 splits m n bytes, small next to the 4 (m k + k n) the chunks read whenever
//          k / splits >= 512.
//
// Epilogue (matmul_bias_relu_cuda, linear_relu's and linear_l2_normalize's forward): the tile
//          (or, split, the sum of the partials) stores relu(acc + bias[col]) instead of acc, in
//          the rounding steps of the separate store, add_row_bias and relu kernels, so the same
//          bits with two passes over C and two launches fewer (fc1 of C2F2 at batch 256: 4.2 MB).
//
// add_row_bias: c[i, j] += bias[j], one thread per element: m n FLOPs, 4 (2 m n + n) bytes.
// column_sums:  db[j] = sum_i dy[i, j], one thread per column summing down the rows in order
//               (consecutive threads read consecutive columns, so every row read is coalesced):
//               m n FLOPs, 4 (m n + n) bytes; deterministic and in the CPU reference's order.
#include <algorithm>
#include <climits>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/cuda_workspace.cuh"
#include "kernels/common/gemm_tile.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/matmul/matmul.h"

namespace engine::kernels {

namespace {

using namespace gemm_tile;

// Loads this thread's 4 values of the tile rows [row0, row0 + 128) x p [k0, k0 + 8) of an
// operand with `rows` rows and `kdim` p-values, stored p-contiguous (element (row, p) at
// src[row kdim + p]: the tile's k-fast layout) or row-contiguous (at src[p rows + row]: row-fast);
// p at or past `k_end` (the end of this block's chunk of p) reads zero.
__device__ __forceinline__ void load_operand(const float* __restrict__ src, bool p_contiguous,
                                             int rows, int kdim, int k_end, int row0, int k0,
                                             float (&v)[kStaged]) {
  if (p_contiguous) {
    load_k_contiguous(src, rows, kdim, row0, k0, k_end, v);
    return;
  }
  const int row = row0 + threadIdx.x % kTileM;
#pragma unroll
  for (int i = 0; i < kStaged; ++i) {
    const int p = k0 + threadIdx.x / kTileM + 2 * i;
    v[i] = (row < rows && p < k_end) ? src[p * rows + row] : 0.0f;
  }
}

// Stores the values load_operand produced at their (p, row) place in the shared tile.
__device__ __forceinline__ void store_operand(float (&tile)[kTileK][kLd], bool p_contiguous,
                                              const float (&v)[kStaged]) {
  if (p_contiguous) {
    store_k_fast(tile, v);
  } else {
    store_row_fast(tile, v);
  }
}

// What the tile stores: acc, or relu(acc + bias[col]) (bias may be null: no add).
struct Epilogue {
  const float* bias = nullptr;
  bool relu = false;
};

__device__ __forceinline__ float apply(const Epilogue& e, float acc, int col) {
  const float v = e.bias != nullptr ? acc + e.bias[col] : acc;
  return e.relu && v < 0.0f ? 0.0f : v;  // relu as unary_cuda.cu: NaN passes
}

// Block (x, y, z) computes the 128 x 128 tile (y, x) of C over p in [z chunk, (z + 1) chunk) and
// writes it to c + z m n (with one chunk, z = 0 and that is C itself).
__global__ void __launch_bounds__(kThreads, 2)
    sgemm_kernel(int m, int n, int k, int chunk, const float* __restrict__ a,
                 const float* __restrict__ b, bool trans_a, bool trans_b, float* __restrict__ c,
                 bool accumulate, Epilogue epilogue) {
  __shared__ Stage stages[2];
  const int m0 = blockIdx.y * kTileM, n0 = blockIdx.x * kTileN;
  const int k_begin = blockIdx.z * chunk, k_end = min(k, k_begin + chunk);
  c += static_cast<size_t>(blockIdx.z) * m * n;
  const int ng = threadIdx.x % 16, mg = threadIdx.x / 16;  // lanes along C's columns
  // op(A) is p-contiguous when A is stored [m, k]; op(B) when B is stored transposed [n, k].
  const bool a_p_contiguous = !trans_a, b_p_contiguous = trans_b;

  float acc[8][8] = {};
  float va[kStaged], vb[kStaged];
  const int tiles = (k_end - k_begin + kTileK - 1) / kTileK;  // chunk is a multiple of 8
  for (int t = -1; t < tiles; ++t) {
    // t == -1 only fills stage 0; step t multiplies stage t & 1 while tile t + 1 is loaded.
    const bool more = t + 1 < tiles;
    if (more) {
      const int k0 = k_begin + (t + 1) * kTileK;
      load_operand(a, a_p_contiguous, m, k, k_end, m0, k0, va);
      load_operand(b, b_p_contiguous, n, k, k_end, n0, k0, vb);
    }
    if (t >= 0) multiply_stage(stages[t & 1], mg, ng, acc);
    if (more) {
      store_operand(stages[(t + 1) & 1].a, a_p_contiguous, va);
      store_operand(stages[(t + 1) & 1].b, b_p_contiguous, vb);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = m0 + micro_offset(mg, i);
    if (row >= m) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int col = n0 + micro_offset(ng, j);
      if (col >= n) continue;
      float* out = c + row * n + col;
      *out = accumulate ? *out + acc[i][j] : apply(epilogue, acc[i][j], col);
    }
  }
}

// c[i] (+)= sum over chunks s = 0, 1, ... of partial[s][i], always in that order.
__global__ void sum_gemm_splits_kernel(const float* __restrict__ partial, int splits, int64_t total,
                                       int n, float* __restrict__ c, bool accumulate,
                                       Epilogue epilogue) {
  for (int64_t i = grid_thread_index(); i < total; i += grid_thread_count()) {
    const float sum = sum_of_splits(partial, splits, total, i);
    c[i] = accumulate ? c[i] + sum : apply(epilogue, sum, int(i % n));
  }
}

__global__ void add_row_bias_kernel(int64_t m, int64_t n, const float* __restrict__ bias,
                                    float* __restrict__ c) {
  for (int64_t e = grid_thread_index(); e < m * n; e += grid_thread_count()) {
    c[e] += bias[e % n];
  }
}

__global__ void column_sums_kernel(int64_t m, int64_t n, const float* __restrict__ dy,
                                   float* __restrict__ db) {
  for (int64_t j = grid_thread_index(); j < n; j += grid_thread_count()) {
    float sum = 0.0f;
    for (int64_t i = 0; i < m; ++i) sum += dy[i * n + j];
    db[j] = sum;
  }
}

}  // namespace

SplitK matmul_cuda_splits(int64_t m, int64_t n, int64_t k) {
  return choose_split_k(k, ceil_div(m, kTileM) * ceil_div(n, kTileN), kTileK);
}

namespace {

void gemm_cuda(int64_t m, int64_t n, int64_t k, const float* a, const float* b, bool trans_a,
               bool trans_b, float* c, bool accumulate, Epilogue epilogue) {
  ENGINE_CHECK(m >= 0 && n >= 0 && k >= 0 && m * k < INT_MAX && k * n < INT_MAX && m * n < INT_MAX,
               "matmul_cuda: m=", m, " n=", n, " k=", k,
               " is negative or needs 64-bit indexing (the kernel indexes in 32 bits)");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C unchanged when accumulating, else zeros
    if (!accumulate) cuda_memset_zero(c, static_cast<size_t>(m * n) * sizeof(float));
    return;
  }
  const SplitK split = matmul_cuda_splits(m, n, k);
  describe_next_launch({"matmul", matmul_flops(m, n, k), matmul_bytes(m, n, k, accumulate)});
  const dim3 grid(static_cast<unsigned>(ceil_div(n, kTileN)),
                  static_cast<unsigned>(ceil_div(m, kTileM)), static_cast<unsigned>(split.splits));
  ENGINE_CHECK(grid.y <= 65535, "matmul_cuda: m=", m, " has too many row tiles for the grid");
  if (split.splits == 1) {
    sgemm_kernel<<<grid, kThreads, 0, current_stream()>>>(
        int(m), int(n), int(k), int(split.chunk), a, b, trans_a, trans_b, c, accumulate, epilogue);
    CUDA_CHECK_LAUNCH("matmul_cuda m=", m, " n=", n, " k=", k, " trans_a=", trans_a,
                      " trans_b=", trans_b);
    return;
  }
  const int64_t total = m * n;
  StreamWorkspace partial(static_cast<size_t>(split.splits * total) * sizeof(float),
                          current_stream(), "matmul_cuda split-K m=", m, " n=", n, " k=", k);
  float* partials = reinterpret_cast<float*>(partial.bytes());
  sgemm_kernel<<<grid, kThreads, 0, current_stream()>>>(int(m), int(n), int(k), int(split.chunk), a,
                                                        b, trans_a, trans_b, partials, false,
                                                        Epilogue{});
  CUDA_CHECK_LAUNCH("matmul_cuda m=", m, " n=", n, " k=", k, " trans_a=", trans_a,
                    " trans_b=", trans_b, " splits=", split.splits);
  sum_gemm_splits_kernel<<<grid_for(total, 256), 256, 0, current_stream()>>>(
      partials, split.splits, total, int(n), c, accumulate, epilogue);
  CUDA_CHECK_LAUNCH("matmul_cuda: sum of ", split.splits, " split-K partials m=", m, " n=", n);
  partial.release("matmul_cuda split-K workspace");
}

}  // namespace

void matmul_cuda(int64_t m, int64_t n, int64_t k, const float* a, const float* b, bool trans_a,
                 bool trans_b, float* c, bool accumulate) {
  gemm_cuda(m, n, k, a, b, trans_a, trans_b, c, accumulate, Epilogue{});
}

void matmul_bias_relu_cuda(int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                           bool trans_a, bool trans_b, const float* bias, bool relu, float* c) {
  // An empty sum never reaches the tile's store, which applies the epilogue.
  ENGINE_CHECK(k >= 1, "matmul_bias_relu_cuda: k must be >= 1, got ", k);
  gemm_cuda(m, n, k, a, b, trans_a, trans_b, c, false, Epilogue{bias, relu});
}

void add_row_bias_cuda(int64_t m, int64_t n, const float* bias, float* c) {
  if (m * n == 0) return;
  add_row_bias_kernel<<<grid_for(m * n, 256), 256, 0, current_stream()>>>(m, n, bias, c);
  CUDA_CHECK_LAUNCH("add_row_bias_cuda m=", m, " n=", n);
}

void column_sums_cuda(int64_t m, int64_t n, const float* dy, float* db) {
  if (n == 0) return;
  column_sums_kernel<<<grid_for(n, 128), 128, 0, current_stream()>>>(m, n, dy, db);
  CUDA_CHECK_LAUNCH("column_sums_cuda m=", m, " n=", n);
}

}  // namespace engine::kernels
