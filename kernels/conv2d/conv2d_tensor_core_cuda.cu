// conv2d on CUDA tensor cores: our implicit-GEMM fprop, dgrad and wgrad with TF32 operands and
// FP32 accumulation, through WMMA (nvcuda::wmma, m16n16k8, precision::tf32). The strict-FP32
// kernels are conv2d_cuda.cu; conv2d_*_tensor_core_cuda pick by the precision policy
// (kernels/common/precision.h), as matmul_tensor_core_cuda does for the GEMM.
//
// Math:    conv2d.h's formulas with every product's two operands first rounded to TF32 by
//          cvt.rna (round to nearest, ties away from zero, 10 mantissa bits): each product is
//          exact in FP32 and the sums round in FP32. fprop adds the bias once at the end, in FP32;
//          wgrad's db is not a product and stays conv2d_wgrad_cuda's FP32 reduction.
// Layout:  x NCHW, w KCRS, y/dy NKPQ, contiguous f32, device pointers; launched on
//          current_stream(), no host synchronization.
// GEMMs:   the three passes are conv2d_cuda.cu's implicit GEMMs C[M, Ncols] = sum_k A[m, k] B[k, n]
//          (fprop: rows N P Q, columns K, reduction C R S; dgrad per stride phase: rows N Hp Wp,
//          columns C, reduction K x the phase's valid taps; wgrad, dW transposed: rows C R S,
//          columns K, reduction N P Q), with the same index math (conv2d_geometry.cuh: fprop_a,
//          dgrad_a / dgrad_b, wgrad_a / wgrad_b); only the tile differs. dgrad with C <= 4 keeps
//          the direct FP32 kernel (conv2d_dgrad_direct_cuda.cu): a tile would use 4 of its 64
//          columns at most, and strict FP32 there is at least as accurate as TF32.
// Tile:    block tile 64 (rows) x 64 (columns) x 16 (reduction), 128 threads = 4 warps in 2 x 2,
//          each warp a 32 x 32 piece of C as 2 x 2 accumulator fragments of 16 x 16. Shared
//          memory (34 KiB): two stages of A [16][64 + 4] (k-major: WMMA matrix_a col_major) and
//          B [16][64 + 4] (matrix_b row_major), plus a C tile [64][64 + 4] stored column-major
//          (c[column][row]) for the epilogue. The +4 keeps every fragment pointer 32-byte aligned
//          and ldm a multiple of 16 bytes, as WMMA requires.
// Pipeline: two stages through registers, as the TF32 GEMM: each thread brings its 8 values of A
//          and 8 of B for the next reduction step from global memory into registers (rounding
//          them to TF32) while the warps multiply the current stage; one __syncthreads per step.
//          No cp.async yet (issue 33's next step).
// Loads:   an operand whose thread-fixed index runs along the output pixels (fprop's and dgrad's
//          A) is staged row-fast (row = tid % 64, k = tid / 64 + 2 v), so consecutive threads read
//          consecutive pixels and decode their row once per kernel; the others k-fast
//          (k = tid % 16, row = tid / 16 + 8 v), so a thread decodes its k once per step (wgrad's
//          (n, p, q) runs along x's and dy's rows). Edges read zeros. The epilogue goes through
//          the shared C tile (store_matrix_sync), never through the fragments' opaque layout;
//          every pass's output is contiguous along the rows (y and dx along the pixels, dW along
//          c r s), so the threads write along rows: coalesced.
// Parallelization: grid (row tiles, column tiles, z): z is dgrad's stride phase or wgrad's split
//          of its N P Q reduction (split_k.h's rule on this tile's count, partial dW summed in
//          split order by conv2d_cuda.cu's second pass: deterministic, no atomics).
// Cost:    2 N K P Q C R S FLOPs per pass (dgrad's phase split skips the zero taps, as in
//          conv2d_cuda.cu). Per block and reduction step the tile reads 2 x 64 x 16 floats (8 KiB,
//          from L1/L2: an x element is reused by up to R S rows) for 2 x 64 x 64 x 16 = 131 kFLOP,
//          16 FLOP/byte, and each thread decodes 8 gathered addresses (integer divisions) per
//          operand per step for 2 x 2 x 2 mma per warp. Expected: bound by L2 traffic and address
//          arithmetic well before the tensor cores, at most about 20-30 % of the dense TF32 peak
//          (495 TFLOP/s on an H100 / H200 SXM), several times our FFMA kernels on the large
//          layers but below cuDNN's TF32 kernels (larger tiles, cp.async). Not measured: no GPU
//          was available when it was written.
// Indexing: 32-bit, as conv2d_cuda.cu (every tensor below 2^31 elements, checked).
#include <mma.h>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/device_counters.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/split_k.h"
#include "kernels/conv2d/conv2d.h"
#include "kernels/conv2d/conv2d_geometry.cuh"

namespace engine::kernels {

using namespace conv2d_detail;

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTile = 64;                           // rows and columns of C per block
constexpr int kTileK = 16;                          // reduction per step: two k8 instructions
constexpr int kFragK = 8;                           // reduction per WMMA instruction
constexpr int kThreads = 128;                       // 4 warps
constexpr int kWarpTile = 32;                       // each warp's square of C
constexpr int kFrag = 16;                           // a fragment's rows and columns
constexpr int kValues = kTile * kTileK / kThreads;  // values of each operand a thread stages
constexpr int kLd = kTile + 4;                      // padded rows of every shared tile

struct alignas(32) Stage {
  float a[kTileK][kLd];  // a[k][row of C]
  float b[kTileK][kLd];  // b[k][column of C]
};
struct alignas(32) SharedTiles {
  Stage stages[2];
  float c[kTile][kLd];  // c[column][row]: the epilogue reads along rows
};

using FragmentA =
    wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFragK, wmma::precision::tf32, wmma::col_major>;
using FragmentB =
    wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFragK, wmma::precision::tf32, wmma::row_major>;
using Accumulator = wmma::fragment<wmma::accumulator, kFrag, kFrag, kFragK, float>;

// Where this thread's staged value v sits in a 64 x 16 operand tile (layouts in the header).
__device__ __forceinline__ int row_fast_row() { return threadIdx.x % kTile; }
__device__ __forceinline__ int row_fast_k(int v) { return threadIdx.x / kTile + 2 * v; }
__device__ __forceinline__ int k_fast_k() { return threadIdx.x % kTileK; }
__device__ __forceinline__ int k_fast_row(int v) { return threadIdx.x / kTileK + 8 * v; }

// Rounds the staged values to TF32 and stores them at their (k, row) places.
__device__ __forceinline__ void store_row_fast(float (&tile)[kTileK][kLd],
                                               const float (&values)[kValues]) {
#pragma unroll
  for (int v = 0; v < kValues; ++v)
    tile[row_fast_k(v)][row_fast_row()] = wmma::__float_to_tf32(values[v]);
}
__device__ __forceinline__ void store_k_fast(float (&tile)[kTileK][kLd],
                                             const float (&values)[kValues]) {
#pragma unroll
  for (int v = 0; v < kValues; ++v)
    tile[k_fast_k()][k_fast_row(v)] = wmma::__float_to_tf32(values[v]);
}

__device__ __forceinline__ void zero_accumulators(Accumulator (&acc)[2][2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }
}

// The warp's 2 x 2 accumulators += its 32 rows of the A stage times its 32 columns of B.
__device__ __forceinline__ void multiply_stage(const Stage& stage, Accumulator (&acc)[2][2]) {
  const int warp = threadIdx.x / warpSize;
  const int warp_row = warp / 2 * kWarpTile, warp_col = warp % 2 * kWarpTile;
#pragma unroll
  for (int kk = 0; kk < kTileK; kk += kFragK) {
    FragmentA a[2];
    FragmentB b[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      wmma::load_matrix_sync(a[i], &stage.a[kk][warp_row + i * kFrag], kLd);
      wmma::load_matrix_sync(b[i], &stage.b[kk][warp_col + i * kFrag], kLd);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
}

// The accumulators into the shared C tile (c[column][row]), then a barrier: afterwards every
// thread may read any element.
__device__ __forceinline__ void accumulators_to_shared(const Accumulator (&acc)[2][2],
                                                       float (&c)[kTile][kLd]) {
  const int warp = threadIdx.x / warpSize;
  const int warp_row = warp / 2 * kWarpTile, warp_col = warp % 2 * kWarpTile;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(&c[warp_col + j * kFrag][warp_row + i * kFrag], acc[i][j], kLd,
                              wmma::mem_col_major);
    }
  }
  __syncthreads();
}

// ---- fprop: rows (n, p, q), columns kout, reduction (c, r, s) ----------------------------------

__global__ void __launch_bounds__(kThreads)
    conv2d_fprop_tf32_kernel(Geometry g, const float* __restrict__ x, const float* __restrict__ w,
                             const float* __restrict__ bias, float* __restrict__ y) {
  __shared__ SharedTiles tiles;
  const int kdim = g.C * g.R * g.S, PQ = g.P * g.Q;
  const int m0 = blockIdx.x * kTile, n0 = blockIdx.y * kTile;
  const FpropRow row = fprop_row(g, m0 + row_fast_row());  // A row-fast: the row is fixed

  Accumulator acc[2][2];
  zero_accumulators(acc);
  float a_values[kValues], b_values[kValues];
  const int steps = (kdim + kTileK - 1) / kTileK;
  for (int t = -1; t < steps; ++t) {
    // t == -1 only fills stage 0; step t multiplies stage t & 1 while step t + 1 is loaded.
    const bool more = t + 1 < steps;
    if (more) {
      const int k0 = (t + 1) * kTileK, k = k0 + k_fast_k();
#pragma unroll
      for (int v = 0; v < kValues; ++v) {
        a_values[v] = fprop_a(g, x, row, k0 + row_fast_k(v), kdim);
        const int kout = n0 + k_fast_row(v);  // B[k, kout] = w[kout, c, r, s]
        b_values[v] = k < kdim && kout < g.K ? w[kout * kdim + k] : 0.0f;
      }
    }
    if (t >= 0) multiply_stage(tiles.stages[t & 1], acc);
    if (more) {
      store_row_fast(tiles.stages[(t + 1) & 1].a, a_values);
      store_k_fast(tiles.stages[(t + 1) & 1].b, b_values);
    }
    __syncthreads();
  }

  accumulators_to_shared(acc, tiles.c);
  for (int e = threadIdx.x; e < kTile * kTile; e += kThreads) {
    const int m = m0 + e % kTile, kout = n0 + e / kTile;
    if (m >= g.N * PQ || kout >= g.K) continue;
    const int img = m / PQ, pix = m - img * PQ;
    y[(img * g.K + kout) * PQ + pix] =
        tiles.c[e / kTile][e % kTile] + (bias != nullptr ? bias[kout] : 0.0f);
  }
}

// ---- dgrad: per phase (blockIdx.z), rows (n, i, j), columns c, reduction (kout, tap) -----------

__global__ void __launch_bounds__(kThreads)
    conv2d_dgrad_tf32_kernel(Geometry g, const float* __restrict__ dy, const float* __restrict__ w,
                             float* __restrict__ dx) {
  __shared__ SharedTiles tiles;
  const DgradPhase phase = dgrad_phase(g, blockIdx.z);
  const int M = g.N * phase.Hp * phase.Wp, kdim = g.K * phase.taps;
  const int m0 = blockIdx.x * kTile, n0 = blockIdx.y * kTile;
  if (m0 >= M) return;  // this phase has fewer pixels than the grid was sized for (whole block)
  const DgradRow row = dgrad_row(g, phase, m0 + row_fast_row());  // A row-fast

  Accumulator acc[2][2];
  zero_accumulators(acc);
  float a_values[kValues], b_values[kValues];
  const int steps = (kdim + kTileK - 1) / kTileK;  // 0 for a phase without taps: zeros out
  for (int t = -1; t < steps; ++t) {
    const bool more = t + 1 < steps;
    if (more) {
      const int k0 = (t + 1) * kTileK, k = k0 + k_fast_k();
      const DgradTap tap = dgrad_tap(phase, k);  // B k-fast: one tap per step
#pragma unroll
      for (int v = 0; v < kValues; ++v) {
        const int ka = k0 + row_fast_k(v);
        a_values[v] = dgrad_a(g, dy, row, dgrad_tap(phase, ka), ka < kdim);
        const int c = n0 + k_fast_row(v);
        b_values[v] = dgrad_b(g, w, tap, c, k < kdim && c < g.C);
      }
    }
    if (t >= 0) multiply_stage(tiles.stages[t & 1], acc);
    if (more) {
      store_row_fast(tiles.stages[(t + 1) & 1].a, a_values);
      store_k_fast(tiles.stages[(t + 1) & 1].b, b_values);
    }
    __syncthreads();
  }

  accumulators_to_shared(acc, tiles.c);
  for (int e = threadIdx.x; e < kTile * kTile; e += kThreads) {
    const int m = m0 + e % kTile, c = n0 + e / kTile;
    if (m >= M || c >= g.C) continue;
    const DgradRow pixel = dgrad_row(g, phase, m);
    dx[((pixel.n_img * g.C + c) * g.H + pixel.h) * g.W + pixel.w] = tiles.c[e / kTile][e % kTile];
  }
}

// ---- wgrad: rows (c, r, s), columns kout, reduction (n, p, q) split over blockIdx.z -----------

// Partial dW over reduction indices [split chunk, min((split + 1) chunk, N P Q)) of split
// blockIdx.z, written (transposed back: dW[kout, crs]) to out + split K C R S.
__global__ void __launch_bounds__(kThreads)
    conv2d_wgrad_tf32_kernel(Geometry g, const float* __restrict__ dy, const float* __restrict__ x,
                             int chunk, float* __restrict__ out) {
  __shared__ SharedTiles tiles;
  const int crs_total = g.C * g.R * g.S;
  const int k_begin = blockIdx.z * chunk;
  const int k_end = min(k_begin + chunk, g.N * g.P * g.Q);
  const int m0 = blockIdx.x * kTile, n0 = blockIdx.y * kTile;

  Accumulator acc[2][2];
  zero_accumulators(acc);
  float a_values[kValues], b_values[kValues];
  const int steps = (k_end - k_begin + kTileK - 1) / kTileK;
  for (int t = -1; t < steps; ++t) {
    const bool more = t + 1 < steps;
    if (more) {
      // Both operands k-fast: one (n, p, q) per thread and step; the rows are decoded as they
      // come (8 of them, too many registers to keep).
      const WgradStep step = wgrad_step(g, k_begin + (t + 1) * kTileK + k_fast_k(), k_end);
#pragma unroll
      for (int v = 0; v < kValues; ++v) {
        a_values[v] = wgrad_a(g, x, step, wgrad_row(g, m0 + k_fast_row(v)));
        b_values[v] = wgrad_b(g, dy, step, n0 + k_fast_row(v));
      }
    }
    if (t >= 0) multiply_stage(tiles.stages[t & 1], acc);
    if (more) {
      store_k_fast(tiles.stages[(t + 1) & 1].a, a_values);
      store_k_fast(tiles.stages[(t + 1) & 1].b, b_values);
    }
    __syncthreads();
  }

  accumulators_to_shared(acc, tiles.c);
  float* dst = out + static_cast<size_t>(blockIdx.z) * g.K * crs_total;
  for (int e = threadIdx.x; e < kTile * kTile; e += kThreads) {
    const int crs = m0 + e % kTile, kout = n0 + e / kTile;
    if (crs < crs_total && kout < g.K) dst[kout * crs_total + crs] = tiles.c[e / kTile][e % kTile];
  }
}

// wgrad's split of N P Q over this tile's output blocks (split_k.h's rule).
SplitK tf32_wgrad_split(const Geometry& g) {
  const int64_t tiles = ceil_div(int64_t(g.C) * g.R * g.S, kTile) * ceil_div(g.K, kTile);
  return choose_split_k(int64_t(g.N) * g.P * g.Q, tiles, kTileK);
}

// Fp32 is the strict kernels' business (the callers forward it); Bf16 has no conv kernel yet.
void check_tf32(Precision precision, const char* op) {
  ENGINE_CHECK(precision == Precision::Tf32, op, ": precision bf16 is not implemented yet on CUDA ",
               "(no BF16 convolution kernel; use fp32 or tf32)");
}

}  // namespace

void conv2d_fprop_tensor_core_cuda(const Conv2dShape& shape, const float* x, const float* w,
                                   const float* bias, float* y, Precision precision) {
  if (precision == Precision::Fp32) return conv2d_fprop_cuda(shape, x, w, bias, y);
  const char* op = "conv2d_fprop_tensor_core_cuda";
  check_tf32(precision, op);
  const Geometry g = geometry(shape, op);
  if (g.N == 0) return;
  const dim3 grid(blocks_for(int64_t(g.N) * g.P * g.Q, kTile), blocks_for(g.K, kTile));
  describe_next_launch({"conv2d_fprop_tf32", conv2d_flops(shape), conv2d_bytes(shape)});
  conv2d_fprop_tf32_kernel<<<grid, kThreads, 0, current_stream()>>>(g, x, w, bias, y);
  CUDA_CHECK_LAUNCH(op, " (tf32) N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K,
                    " R=", g.R, " S=", g.S);
}

void conv2d_dgrad_tensor_core_cuda(const Conv2dShape& shape, const float* dy, const float* w,
                                   float* dx, Precision precision) {
  if (precision == Precision::Fp32) return conv2d_dgrad_cuda(shape, dy, w, dx);
  const char* op = "conv2d_dgrad_tensor_core_cuda";
  check_tf32(precision, op);
  const Geometry g = geometry(shape, op);
  if (g.N == 0 || g.H == 0 || g.W == 0) return;
  check_dgrad_phases(g, op);
  if (g.C <= kDirectDgradDefaultMaxC && g.R * g.S <= kDirectDgradFilterTaps) {
    // A first layer: the direct FP32 kernel, as conv2d_dgrad_cuda (the header says why).
    describe_next_launch({"conv2d_dgrad_direct", conv2d_flops(shape), conv2d_bytes(shape)});
    launch_dgrad_direct(g, dy, w, dx, op);
    return;
  }
  // Phase (0, 0) has the most pixels: ceil(H / sh) ceil(W / sw) per image.
  const int64_t rows = int64_t(g.N) * ceil_div(g.H, g.sh) * ceil_div(g.W, g.sw);
  const dim3 grid(blocks_for(rows, kTile), blocks_for(g.C, kTile), g.sh * g.sw);
  describe_next_launch({"conv2d_dgrad_tf32", conv2d_flops(shape), conv2d_bytes(shape)});
  conv2d_dgrad_tf32_kernel<<<grid, kThreads, 0, current_stream()>>>(g, dy, w, dx);
  CUDA_CHECK_LAUNCH(op, " (tf32) N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K,
                    " R=", g.R, " S=", g.S);
}

int64_t conv2d_wgrad_tensor_core_cuda_workspace_size(const Conv2dShape& shape,
                                                     Precision precision) {
  if (precision == Precision::Fp32) return conv2d_wgrad_cuda_workspace_size(shape);
  const char* op = "conv2d_wgrad_tensor_core_cuda";
  check_tf32(precision, op);
  const Geometry g = geometry(shape, op);
  const SplitK split = tf32_wgrad_split(g);
  return split.splits > 1 ? int64_t(split.splits) * g.K * g.C * g.R * g.S : 0;
}

void conv2d_wgrad_tensor_core_cuda(const Conv2dShape& shape, const float* dy, const float* x,
                                   float* dw, float* db, float* workspace, Precision precision) {
  if (precision == Precision::Fp32) return conv2d_wgrad_cuda(shape, dy, x, dw, db, workspace);
  const char* op = "conv2d_wgrad_tensor_core_cuda";
  check_tf32(precision, op);
  const Geometry g = geometry(shape, op);
  if (g.N == 0) {  // an empty reduction: zero gradients, as conv2d_wgrad_cuda writes them
    conv2d_wgrad_cuda(shape, dy, x, dw, db, nullptr);
    return;
  }
  // db sums dy, no product to round: conv2d_wgrad_cuda's FP32 reduction.
  if (db != nullptr) conv2d_wgrad_cuda(shape, dy, x, nullptr, db, nullptr);
  if (dw == nullptr) return;
  const SplitK split = tf32_wgrad_split(g);
  ENGINE_CHECK(split.splits == 1 || workspace != nullptr, op, ": ", split.splits,
               "-way split-K needs a workspace of conv2d_wgrad_tensor_core_cuda_workspace_size() "
               "floats");
  const int crs = g.C * g.R * g.S;
  float* out = split.splits > 1 ? workspace : dw;
  const dim3 grid(blocks_for(crs, kTile), blocks_for(g.K, kTile), split.splits);
  describe_next_launch({"conv2d_wgrad_tf32", conv2d_flops(shape), conv2d_bytes(shape)});
  conv2d_wgrad_tf32_kernel<<<grid, kThreads, 0, current_stream()>>>(g, dy, x, int(split.chunk),
                                                                    out);
  CUDA_CHECK_LAUNCH(op, " (tf32) N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K,
                    " R=", g.R, " S=", g.S, " splits=", split.splits);
  if (split.splits > 1) launch_sum_splits(workspace, split.splits, g.K * crs, dw);
}

}  // namespace engine::kernels
