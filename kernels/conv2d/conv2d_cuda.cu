// conv2d on CUDA: our own implicit-GEMM kernels for fprop, dgrad and wgrad, strict FP32 (FFMA).
// Their TF32 tensor-core versions (conv2d_tensor_core_cuda.cu) share the operands' index math
// (conv2d_geometry.cuh: fprop_a, dgrad_a/b, wgrad_a/b) and differ in the tile.
//
// Math: conv2d.h. Layout: x NCHW, w KCRS, y/dy NKPQ, contiguous f32, device pointers; every
// launch is on current_stream() and nothing here synchronizes with the host.
//
// Each pass is one matrix product C[M, Ncols] = sum_k A[m, k] B[k, n] whose operands are never
// materialized (no im2col buffer): a tile loader computes, for every (row, k) it needs, the
// address in x / w / dy the matrix element would have come from, and reads 0 for padding.
//
//   pass   M (rows)        Ncols        Kdim (reduction)   A[m, k]              B[k, n]
//   fprop  N P Q (n,p,q)   K            C R S (c,r,s)      x[n,c,p sh-ph+r dh,  w[n_k, c, r, s]
//                                                           q sw-pw+s dw]
//   dgrad  N H W (n,h,w)   C            K R S (k,r,s)      dy[n,k,p,q] with     w[k, c, r, s]
//          (per phase)                  (valid taps only)  p = (h+ph-r dh)/sh
//   wgrad  C R S (c,r,s)   K            N P Q (n,p,q)      x[n,c,p sh-ph+r dh,  dy[n,k,p,q]
//          (dW transposed)                                  q sw-pw+s dw]
//
// dgrad and strides: output pixel h only receives taps r with (h + ph - r dh) divisible by sh.
// Pixels are split into sh sw "phases" (h mod sh, w mod sw; blockIdx.z); within a phase the valid
// r form an arithmetic progression r0, r0 + sh/gcd(sh, dh), ..., so the GEMM of a phase runs over
// exactly the valid taps and skips the others instead of multiplying zeros (for stride 2 that is
// 4x less work than the zero-filled formulation). Stride 1 is one phase with every tap.
//
// dgrad with C <= 4 (a first layer: 1 channel for Fashion-MNIST, 3 for RGB) would fill 1 to 4
// of a tile's 32 to 128 columns, so it has its own direct kernel, one thread per input pixel
// (conv2d_dgrad_direct_cuda.cu).
//
// wgrad and split-K: Kdim = N P Q is long and M N small (layer1 of ResNet-18: 64 x 576), so the
// reduction is cut into `splits` contiguous chunks of (n, p, q) (blockIdx.z). Each chunk writes
// its partial dW to workspace[split] and a second kernel sums the partials in split order, so the
// result is deterministic (no atomics). db is a separate deterministic block reduction.
//
// Tiles (all three passes): the SGEMM tile shared with matmul (kernels/common/gemm_tile.cuh):
// block tile 128 rows x kCols columns of C, kCols = 128, 64 or 32 (one kernel template per pass;
// ConvTile in conv2d.h, the rule that picks one per shape in conv2d_tiles.cpp), Kdim step 8, 256
// threads, an 8 x kCols/16 register tile per thread, A and B tiles double-buffered in shared
// memory (16.5, 12.4 or 10.3 KiB per block). Registers: 8 kCols/16 accumulators + fragments + 4
// + kCols/32 staged global values + addressing, capped at 128 per thread by
// __launch_bounds__(256, 2) (two blocks per SM). Pipeline: the next tile is read from global
// memory into registers while the current one is multiplied out of shared memory; one
// __syncthreads per k step. Every width does each output's multiply-adds in the same order (k
// ascending, one fmaf each), so all widths give the same bits; wgrad's only when they split N P Q
// into the same number of chunks (wgrad_split counts the width's column tiles).
//
// Cost: FLOPs = 2 N K P Q C R S for each pass, the number benchmarks divide by. fprop and wgrad
// run a GEMM of exactly that size (padding taps multiply zeros, as the formula counts them;
// partial edge tiles add idle lanes); dgrad runs sum over phases of 2 N Hp Wp C K Rp Sp
// ~ 2 N (H W / (sh sw)) C K R S ~ the same, thanks to the phase split.
// Registers (ptxas, nvcc 13.0, sm_90, fprop / dgrad / wgrad): 128 columns 127 / 128 (+ 8 bytes
// spilled, as before the widths) / 128 (+ 4 bytes spilled since the index math moved to
// conv2d_geometry.cuh); 64 columns 95 / 95 / 107; 32 columns 79 / 87 / 91; no other spills.
// Shared memory 16896, 12800 and 10752 bytes per block.
// Minimal bytes (the memory floor, each tensor touched once, 4 bytes per element):
//   fprop 4 (N C H W + K C R S + N K P Q)      (read x, w; write y; + K for the bias)
//   dgrad 4 (N K P Q + K C R S + N C H W)      (read dy, w; write dx)
//   wgrad 4 (N K P Q + N C H W + K C R S)      (read dy, x; write dw) + 8 splits K C R S when
//         split-K is on (partials written, then read by the sum); db reads dy again: 4 N K P Q.
// Useful work: the fraction of the multiply-adds the tiles issue that belong to the product
// (rows x columns x Kdim steps used / issued), for C2F2 at 256 images (conv1 1 -> 32, 28 x 28;
// conv2 32 -> 64, 14 x 14; 5 x 5, pad 2, stride 1; split-K of wgrad for 132 SMs):
//   layer pass    M       Ncols  Kdim     128 cols   64 cols   32 cols   rule (132 SMs)
//   conv1 fprop   200704  32     25       19.5 %     39.1 %    78.1 %    32
//   conv1 dgrad   (C = 1: the direct kernel, one thread per input pixel, no tile)
//   conv1 wgrad   25      32     200704   4.9 %      9.8 %     19.5 %    32
//   conv2 fprop   50176   64     800      50 %       100 %     100 %     64
//   conv2 dgrad   50176   32     1600     25 %       50 %      100 %     32
//   conv2 wgrad   800     64     50176    44.6 %     89.3 %    89.3 %    64
// (M tiles of 128 rows: conv1 wgrad's 25 rows use 19.5 % of them, conv2 wgrad's 800 rows 89.3 %;
// Kdim in steps of 8: conv1 fprop's 25 use 78.1 %; the others are exact.) The split counts of
// wgrad are the same for every width on these layers (K <= 64 is one column tile from 64 up; for
// conv1 also at 32, and conv2 at 32 has 14 tiles and 19 chunks instead of 7 and 38), so all but
// conv2 wgrad at 32 columns give the 128 tile's bits.
// Indexing is 32-bit: every tensor must have fewer than 2^31 elements (checked, with the shapes).
#include <algorithm>
#include <climits>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/gemm_tile.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/split_k.h"
#include "kernels/conv2d/conv2d.h"
#include "kernels/conv2d/conv2d_geometry.cuh"
#include "kernels/conv2d/conv2d_tiles.h"

namespace engine::kernels {

using namespace conv2d_detail;
using namespace gemm_tile;

namespace {

// ---- fprop ----------------------------------------------------------------------------------

// A row-fast: thread's row m = (n, p, q) is fixed; its 4 k = (c, r, s) change every step.
__device__ __forceinline__ void load_fprop_a(const Geometry& g, const float* __restrict__ x,
                                             const FpropRow& row, int k0, int k_end,
                                             float (&v)[kStaged]) {
#pragma unroll
  for (int i = 0; i < kStaged; ++i)
    v[i] = fprop_a(g, x, row, k0 + threadIdx.x / kTileM + 2 * i, k_end);
}

template <int kCols>
__global__ void __launch_bounds__(kThreads, 2)
    conv2d_fprop_kernel(Geometry g, const float* __restrict__ x, const float* __restrict__ w,
                        const float* __restrict__ bias, float* __restrict__ y) {
  __shared__ TileStage<kCols> stages[2];
  constexpr int kCn = kCols / 16;
  const int M = g.N * g.P * g.Q, kdim = g.C * g.R * g.S;
  const int m0 = blockIdx.x * kTileM, n0 = blockIdx.y * kCols;
  const int mg = threadIdx.x % 16, ng = threadIdx.x / 16;  // lanes run along m = output pixels

  const FpropRow a_row = fprop_row(g, m0 + threadIdx.x % kTileM);  // this thread's A row (row-fast)

  float acc[8][kCn] = {};
  // Zero-initialized only for the emulator's ThreadSanitizer build, whose g++ -O2 cannot see that
  // a stage is stored only after it was loaded (-Wmaybe-uninitialized); results are unchanged.
  float va[kStaged] = {}, vb[staged_values(kCols)] = {};
  const int tiles = (kdim + kTileK - 1) / kTileK;
  for (int t = -1; t < tiles; ++t) {
    // t == -1 only fills stage 0; afterwards step t multiplies stage t & 1 while the registers
    // bring in tile t + 1, which goes to the other stage.
    const bool more = t + 1 < tiles;
    if (more) {
      const int k0 = (t + 1) * kTileK;
      load_fprop_a(g, x, a_row, k0, kdim, va);
      load_k_contiguous(w, g.K, kdim, n0, k0, kdim, vb);  // B[k, n] = w[n Kdim + k]
    }
    if (t >= 0) multiply_stage(stages[t & 1], mg, ng, acc);
    if (more) {
      store_row_fast(stages[(t + 1) & 1].a, va);
      store_k_fast(stages[(t + 1) & 1].b, vb);
    }
    __syncthreads();
  }

  // Epilogue: y[n, k, p, q] = acc + bias[k].
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = m0 + micro_offset(mg, i);
    if (row >= M) continue;
    const int img = row / (g.P * g.Q), pix = row - img * g.P * g.Q;
#pragma unroll
    for (int j = 0; j < kCn; ++j) {
      const int k = n0 + column_offset<kCols>(ng, j);
      if (k >= g.K) continue;
      y[(img * g.K + k) * g.P * g.Q + pix] = acc[i][j] + (bias != nullptr ? bias[k] : 0.0f);
    }
  }
}

// ---- dgrad ----------------------------------------------------------------------------------

template <int kCols>
__global__ void __launch_bounds__(kThreads, 2)
    conv2d_dgrad_kernel(Geometry g, const float* __restrict__ dy, const float* __restrict__ w,
                        float* __restrict__ dx) {
  __shared__ TileStage<kCols> stages[2];
  constexpr int kCn = kCols / 16;
  const DgradPhase phase = dgrad_phase(g, blockIdx.z);
  const int M = g.N * phase.Hp * phase.Wp;
  const int m0 = blockIdx.x * kTileM, n0 = blockIdx.y * kCols;
  if (m0 >= M) return;  // this phase has fewer pixels than the grid was sized for (whole block)
  const int kdim = g.K * phase.taps;
  const int mg = threadIdx.x % 16, ng = threadIdx.x / 16;

  // This thread's A row m = (n, i, j): pixel h = phase.h + i sh, w = phase.w + j sw.
  const DgradRow a_row = dgrad_row(g, phase, m0 + threadIdx.x % kTileM);

  float acc[8][kCn] = {};
  float va[kStaged] = {}, vb[staged_values(kCols)] = {};  // = {}: see conv2d_fprop_kernel
  const int tiles = (kdim + kTileK - 1) / kTileK;
  for (int t = -1; t < tiles; ++t) {
    // Same pipeline as fprop. Loads happen only when tiles > 0, i.e. taps >= 1.
    const bool more = t + 1 < tiles;
    if (more) {
      const int k0 = (t + 1) * kTileK;
      // A (row-fast): k = (kout, tap) -> dy[n, kout, p, q] with p = (h + ph - r dh) / sh exact.
#pragma unroll
      for (int i = 0; i < kStaged; ++i) {
        const int k = k0 + threadIdx.x / kTileM + 2 * i;
        va[i] = dgrad_a(g, dy, a_row, dgrad_tap(phase, k), k < kdim);
      }
      // B (k-fast): B[k, c] = w[kout, c, r, s].
      const int k = k0 + threadIdx.x % kTileK;
      const DgradTap tap = dgrad_tap(phase, k);
#pragma unroll
      for (int i = 0; i < staged_values(kCols); ++i) {
        const int c = n0 + threadIdx.x / kTileK + 32 * i;
        vb[i] = dgrad_b(g, w, tap, c, k < kdim && c < g.C);
      }
    }
    if (t >= 0) multiply_stage(stages[t & 1], mg, ng, acc);
    if (more) {
      store_row_fast(stages[(t + 1) & 1].a, va);
      store_k_fast(stages[(t + 1) & 1].b, vb);
    }
    __syncthreads();
  }

  // Epilogue: dx[n, c, h, w]; a phase without taps writes zeros (tiles == 0).
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = m0 + micro_offset(mg, i);
    if (row >= M) continue;
    const DgradRow pixel = dgrad_row(g, phase, row);
#pragma unroll
    for (int j = 0; j < kCn; ++j) {
      const int c = n0 + column_offset<kCols>(ng, j);
      if (c >= g.C) continue;
      dx[((pixel.n_img * g.C + c) * g.H + pixel.h) * g.W + pixel.w] = acc[i][j];
    }
  }
}

// ---- wgrad ----------------------------------------------------------------------------------

// Partial dW over reduction indices [split * chunk, min((split + 1) * chunk, N P Q)) of split
// blockIdx.z, written to out + split * K C R S. The GEMM is dW transposed: rows (c, r, s) from x,
// columns kout from dy, so the narrow side (K) is the tile's column count like fprop's.
template <int kCols>
__global__ void __launch_bounds__(kThreads, 2)
    conv2d_wgrad_kernel(Geometry g, const float* __restrict__ dy, const float* __restrict__ x,
                        int chunk, float* __restrict__ out) {
  __shared__ TileStage<kCols> stages[2];
  constexpr int kCn = kCols / 16, kStagedB = staged_values(kCols);
  const int PQ = g.P * g.Q, crs_total = g.C * g.R * g.S;
  const int k_begin = blockIdx.z * chunk;
  const int k_end = min(k_begin + chunk, g.N * PQ);
  const int m0 = blockIdx.x * kTileM, n0 = blockIdx.y * kCols;
  // Output dW[kout, crs] is contiguous along crs: lanes run along m for coalesced stores.
  const int mg = threadIdx.x % 16, ng = threadIdx.x / 16;

  // The 4 A rows (c, r, s) this thread loads never change: decompose them once.
  WgradRow rows[kStaged];
#pragma unroll
  for (int i = 0; i < kStaged; ++i) rows[i] = wgrad_row(g, m0 + threadIdx.x / kTileK + 32 * i);

  float acc[8][kCn] = {};
  float va[kStaged] = {}, vb[kStagedB] = {};  // = {}: see conv2d_fprop_kernel
  const int tiles = (k_end - k_begin + kTileK - 1) / kTileK;
  for (int t = -1; t < tiles; ++t) {
    const bool more = t + 1 < tiles;
    if (more) {
      // Both operands are k-fast and share this thread's reduction index k = (n, p, q).
      const WgradStep step =
          wgrad_step(g, k_begin + (t + 1) * kTileK + threadIdx.x % kTileK, k_end);
#pragma unroll
      for (int i = 0; i < kStaged; ++i) va[i] = wgrad_a(g, x, step, rows[i]);
#pragma unroll
      for (int i = 0; i < kStagedB; ++i)
        vb[i] = wgrad_b(g, dy, step, n0 + threadIdx.x / kTileK + 32 * i);
    }
    if (t >= 0) multiply_stage(stages[t & 1], mg, ng, acc);
    if (more) {
      store_k_fast(stages[(t + 1) & 1].a, va);
      store_k_fast(stages[(t + 1) & 1].b, vb);
    }
    __syncthreads();
  }

  float* dst = out + static_cast<size_t>(blockIdx.z) * g.K * crs_total;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int crs = m0 + micro_offset(mg, i);
    if (crs >= crs_total) continue;
#pragma unroll
    for (int j = 0; j < kCn; ++j) {
      const int kout = n0 + column_offset<kCols>(ng, j);
      if (kout < g.K) dst[kout * crs_total + crs] = acc[i][j];
    }
  }
}

// dw[i] = sum over splits s = 0, 1, ... of partial[s][i], always in that order.
__global__ void sum_splits_kernel(const float* __restrict__ partial, int splits, int total,
                                  float* __restrict__ dw) {
  for (int64_t i = grid_thread_index(); i < total; i += grid_thread_count()) {
    dw[i] = sum_of_splits(partial, splits, total, i);
  }
}

// db[k] = sum_{n, p, q} dy[n, k, p, q]: one block per k (grid-stride), each thread a strided
// partial sum over (n, pq), then a fixed-shape shared-memory tree: deterministic.
constexpr int kBiasThreads = 256;
__global__ void bias_grad_kernel(const float* __restrict__ dy, int N, int K, int PQ,
                                 float* __restrict__ db) {
  __shared__ float partial[kBiasThreads];
  for (int k = blockIdx.x; k < K; k += gridDim.x) {
    float sum = 0.0f;
    for (int e = threadIdx.x; e < N * PQ; e += kBiasThreads) {
      const int n = e / PQ;
      sum += dy[(n * K + k) * PQ + (e - n * PQ)];
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = kBiasThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) db[k] = partial[0];
    __syncthreads();  // partial[] is reused by the next k
  }
}

// ---- host side ------------------------------------------------------------------------------

// The width to launch: `tile`, or the rule's pick on this device for Auto.
int tile_columns(ConvTile tile, ConvPass pass, const Conv2dShape& shape) {
  if (tile == ConvTile::Auto) tile = conv2d_pick_tile(pass, shape, cuda_multiprocessor_count());
  return conv2d_tile_columns(tile);
}

}  // namespace

void conv2d_detail::launch_sum_splits(const float* partial, int splits, int total, float* dw) {
  sum_splits_kernel<<<grid_for(total, 256), 256, 0, current_stream()>>>(partial, splits, total, dw);
  CUDA_CHECK_LAUNCH("conv2d wgrad split-K sum, K C R S=", total, " splits=", splits);
}

void conv2d_fprop_cuda(const Conv2dShape& shape, const float* x, const float* w, const float* bias,
                       float* y, ConvTile tile) {
  const Geometry g = geometry(shape, "conv2d_fprop_cuda");
  if (g.N == 0) return;
  const int cols = tile_columns(tile, ConvPass::Fprop, shape);
  const dim3 grid(blocks_for(int64_t(g.N) * g.P * g.Q, kTileM), blocks_for(g.K, cols));
  describe_next_launch({"conv2d_fprop", conv2d_flops(shape), conv2d_bytes(shape)});
  if (cols == 32) {
    conv2d_fprop_kernel<32><<<grid, kThreads, 0, current_stream()>>>(g, x, w, bias, y);
  } else if (cols == 64) {
    conv2d_fprop_kernel<64><<<grid, kThreads, 0, current_stream()>>>(g, x, w, bias, y);
  } else {
    conv2d_fprop_kernel<128><<<grid, kThreads, 0, current_stream()>>>(g, x, w, bias, y);
  }
  CUDA_CHECK_LAUNCH("conv2d_fprop_cuda N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K,
                    " R=", g.R, " S=", g.S, " tile columns=", cols);
}

void conv2d_dgrad_cuda(const Conv2dShape& shape, const float* dy, const float* w, float* dx,
                       ConvTile tile) {
  const char* op = "conv2d_dgrad_cuda";
  const Geometry g = geometry(shape, op);
  if (g.N == 0 || g.H == 0 || g.W == 0) return;
  check_dgrad_phases(g, op);
  // A first layer: one thread per input pixel instead of a GEMM tile of at least 32 columns.
  if (launch_dgrad_direct_for_first_layer(shape, g, dy, w, dx, op)) return;
  const int cols = tile_columns(tile, ConvPass::Dgrad, shape);
  // Phase (0, 0) has the most pixels: ceil(H / sh) ceil(W / sw) per image.
  const int64_t rows = int64_t(g.N) * ceil_div(g.H, g.sh) * ceil_div(g.W, g.sw);
  const dim3 grid(blocks_for(rows, kTileM), blocks_for(g.C, cols), g.sh * g.sw);
  describe_next_launch({"conv2d_dgrad", conv2d_flops(shape), conv2d_bytes(shape)});
  if (cols == 32) {
    conv2d_dgrad_kernel<32><<<grid, kThreads, 0, current_stream()>>>(g, dy, w, dx);
  } else if (cols == 64) {
    conv2d_dgrad_kernel<64><<<grid, kThreads, 0, current_stream()>>>(g, dy, w, dx);
  } else {
    conv2d_dgrad_kernel<128><<<grid, kThreads, 0, current_stream()>>>(g, dy, w, dx);
  }
  CUDA_CHECK_LAUNCH(op, " N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K, " R=", g.R,
                    " S=", g.S, " tile columns=", cols);
}

int64_t conv2d_wgrad_cuda_workspace_size(const Conv2dShape& shape, ConvTile tile) {
  const Geometry g = geometry(shape, "conv2d_wgrad_cuda");
  const int cols = tile_columns(tile, ConvPass::Wgrad, shape);
  const SplitK split = wgrad_split(shape, cols, cuda_multiprocessor_count());
  return split.splits > 1 ? int64_t(split.splits) * g.K * g.C * g.R * g.S : 0;
}

void conv2d_wgrad_cuda(const Conv2dShape& shape, const float* dy, const float* x, float* dw,
                       float* db, float* workspace, ConvTile tile) {
  const Geometry g = geometry(shape, "conv2d_wgrad_cuda");
  const int64_t PQ = int64_t(g.P) * g.Q, dw_size = int64_t(g.K) * g.C * g.R * g.S;
  if (g.N == 0) {  // an empty reduction: the gradients are zero
    if (dw != nullptr) cuda_memset_zero(dw, dw_size * sizeof(float));
    if (db != nullptr) cuda_memset_zero(db, g.K * sizeof(float));
    return;
  }
  if (dw != nullptr) {
    const int cols = tile_columns(tile, ConvPass::Wgrad, shape);
    const SplitK split = wgrad_split(shape, cols, cuda_multiprocessor_count());
    ENGINE_CHECK(split.splits == 1 || workspace != nullptr, "conv2d_wgrad_cuda: ", split.splits,
                 "-way split-K needs a workspace of conv2d_wgrad_cuda_workspace_size() floats");
    float* out = split.splits > 1 ? workspace : dw;
    const int chunk = int(split.chunk);
    const dim3 grid(blocks_for(dw_size / g.K, kTileM), blocks_for(g.K, cols), split.splits);
    describe_next_launch({"conv2d_wgrad", conv2d_flops(shape), conv2d_bytes(shape)});
    if (cols == 32) {
      conv2d_wgrad_kernel<32><<<grid, kThreads, 0, current_stream()>>>(g, dy, x, chunk, out);
    } else if (cols == 64) {
      conv2d_wgrad_kernel<64><<<grid, kThreads, 0, current_stream()>>>(g, dy, x, chunk, out);
    } else {
      conv2d_wgrad_kernel<128><<<grid, kThreads, 0, current_stream()>>>(g, dy, x, chunk, out);
    }
    CUDA_CHECK_LAUNCH("conv2d_wgrad_cuda N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K,
                      " R=", g.R, " S=", g.S, " splits=", split.splits, " tile columns=", cols);
    if (split.splits > 1) launch_sum_splits(workspace, split.splits, int(dw_size), dw);
  }
  if (db != nullptr) {
    const unsigned blocks = static_cast<unsigned>(std::min(g.K, 65535));
    bias_grad_kernel<<<blocks, kBiasThreads, 0, current_stream()>>>(dy, g.N, g.K,
                                                                    static_cast<int>(PQ), db);
    CUDA_CHECK_LAUNCH("conv2d_wgrad_cuda db, N=", g.N, " K=", g.K, " P=", g.P, " Q=", g.Q);
  }
}

}  // namespace engine::kernels
