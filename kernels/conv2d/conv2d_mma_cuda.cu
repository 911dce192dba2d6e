// conv2d's fprop, dgrad and wgrad on CUDA tensor cores through mma.sync, with a three-stage
// cp.async pipeline: the TF32 contract of conv2d_*_tensor_core_cuda (conv2d.h), a second kernel
// beside the WMMA one (conv2d_tensor_core_cuda.cu). engine::tensor_core_conv() (engine/backend.h,
// ENGINE_TC_CONV=wmma|mma) picks between them under the tf32 policy.
//
// Math:    conv2d.h's formulas with both operands of every product rounded to TF32 by cvt.rna
//          (round to nearest, ties away from zero) as they go from shared memory into registers;
//          each product is exact in FP32 and the sums round in FP32, 8 reduction values per
//          instruction. fprop adds the bias once at the end, in FP32; wgrad's db is not a product
//          and stays conv2d_wgrad_cuda's FP32 reduction. The same results class and
//          test bound as the WMMA kernel (tests/ops/conv2d_mma_cuda_test.cpp).
// Layout:  x NCHW, w KCRS, y/dy NKPQ, contiguous f32, device pointers; launched on
//          current_stream(), no host synchronization.
// GEMMs:   conv2d_cuda.cu's implicit GEMMs C[M, Ncols] = sum_k A[m, k] B[k, n], with the index math
//          of conv2d_geometry.cuh (the *_offset functions): fprop rows
//          N P Q, columns K, reduction C R S; dgrad per stride phase (blockIdx.z) rows N Hp Wp,
//          columns C, reduction K x the phase's valid taps; wgrad (dW transposed) rows C R S,
//          columns K, reduction N P Q split over blockIdx.z (split_k.h's rule on this tile's
//          count; the partial dW summed in split order by conv2d_cuda.cu's second pass:
//          deterministic, no atomics). dgrad with C <= 4 keeps the direct
//          FP32 kernel, as the WMMA path does (a 64-column tile would use 4 columns at most).
// Tile:    block tile 128 (rows) x 64 (columns) x 16 (reduction), 128 threads = 4 warps in 2 x 2,
//          each warp 64 x 32 of C as 4 x 4 mma.sync.m16n8k8 tiles (64 FP32 accumulators per
//          thread in the documented layout, kernels/common/mma_sync.cuh), written from registers
//          by the epilogue (no shared C tile, unlike WMMA's opaque fragments).
// Pipeline: three shared-memory stages (41 KiB of the 48 KiB static limit), as
//          matmul_mma_cuda.cu: while the warps multiply stage s, the copies of s + 1 and s + 2 are
//          in flight; one cp.async.wait_group 1 and one __syncthreads per 16 reduction values, and
//          the stage a step refills is the one every warp finished before that barrier.
// Loads:   A (the gathered activations: x for fprop, dy for dgrad) is stored [16][128 + 8]
//          (reduction-major); thread t copies row t for all 16 reduction values with 4-byte
//          cp.async, so consecutive threads read consecutive pixels, and each thread decodes its
//          row once per kernel. Padding, rows past the end and reduction values past the end are
//          copies with src-size 0 (zeros written, nothing read). B (the weights) is stored
//          [64][16 + 4] (column-major, reduction contiguous): fprop's B[k, kout] = w[kout C R S +
//          k] is contiguous along k, so it moves in 16-byte copies when C R S is a multiple of 4
//          and w 16-byte aligned, else in 4-byte ones; dgrad's B[(kout, tap), c] is strided along
//          both indices (only the phase's taps), so always 4-byte copies, each thread decoding one
//          tap per stage. The paddings put each instruction's 32 fragment reads in 32 different
//          banks.
//          wgrad stages both operands reduction-fast (k = thread % 16, 4-byte copies): threads
//          walk x and dy along (n, p, q), and each decodes one (n, p, q) per stage.
// Cost:    2 N K P Q C R S FLOPs per pass (dgrad skips a phase's zero taps). Per block and 16
//          reduction values the tile reads (128 + 64) x 16 floats (12 KiB, mostly L1/L2 hits: an x
//          element is reused by up to R S rows) for 2 x 128 x 64 x 16 = 262 kFLOP, 21.3 FLOP/byte
//          (16 for the WMMA kernel's 64 x 64), and each thread decodes 16 gathered addresses
//          (integer divisions) per stage for 16 mma per warp per 8 reduction values. Expected:
//          bound by L2 traffic and address arithmetic, at most about 25 % of the dense TF32 peak
//          (495 TFLOP/s, H100 / H200 SXM), above the WMMA kernel, still below cuDNN's TF32 kernels
//          (larger tiles, precomputed gather offsets). Not measured: no GPU was available when it
//          was written.
// Indexing: 32-bit, as conv2d_cuda.cu (every tensor below 2^31 elements, checked by geometry()).
#include <cstdint>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/device_counters.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/mma_sync.cuh"
#include "kernels/common/split_k.h"
#include "kernels/conv2d/conv2d_geometry.cuh"
#include "kernels/conv2d/conv2d_mma.h"

namespace engine::kernels {

using namespace conv2d_detail;

namespace {

constexpr int kTileM = 128;                      // rows of C per block (output or input pixels)
constexpr int kTileN = 64;                       // columns of C per block (kout or c)
constexpr int kTileK = 16;                       // reduction values per stage
constexpr int kStages = 3;                       // shared-memory stages in the pipeline
constexpr int kThreads = 128;                    // 4 warps in 2 x 2; thread t stages A's row t
constexpr int kWarpM = 64, kWarpN = 32;          // each warp's piece of C
constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 8;  // one mma.sync.m16n8k8
constexpr int kWarpTilesM = kWarpM / kMmaM;      // 4 instructions down
constexpr int kWarpTilesN = kWarpN / kMmaN;      // 4 across
constexpr int kAStride = kTileM + 8;             // A stage: a[k][row]
constexpr int kBStride = kTileK + 4;             // B stage: b[column][k], 80 bytes a column

static_assert(kThreads == kTileM, "each thread stages one row of A");

struct alignas(16) Stage {
  float a[kTileK * kAStride];
  float b[kTileN * kBStride];
};
struct alignas(16) SharedStages {
  Stage stages[kStages];
};

// One 4-byte copy of src[offset] into `to`, or zeros when offset < 0 (src itself is passed then:
// a valid address that is not read).
__device__ __forceinline__ void copy_or_zero(float* to, const float* __restrict__ src, int offset) {
  cp_async_4(to, offset >= 0 ? src + offset : src, offset >= 0 ? 4 : 0);
}

// fprop's B stage: B[k, kout] = w[kout kdim + k] for k in [k0, k0 + 16), kout in [n0, n0 + 64).
__device__ __forceinline__ void load_fprop_b(float* stage, const float* __restrict__ w, int K,
                                             int kdim, bool vectors, int n0, int k0) {
  const int per_copy = vectors ? 4 : 1;
  const int copies = kTileN * kTileK / per_copy;
  for (int id = threadIdx.x; id < copies; id += kThreads) {
    const int col = id / (kTileK / per_copy), k = id % (kTileK / per_copy) * per_copy;
    const int kout = n0 + col, global_k = k0 + k;
    // With vectors kdim % 4 == 0, so a 16-byte copy is wholly inside or wholly past the end.
    const bool inside = kout < K && global_k < kdim;
    const float* from = inside ? w + kout * kdim + global_k : w;
    float* to = stage + col * kBStride + k;
    if (vectors) {
      cp_async_16(to, from, inside ? 16 : 0);
    } else {
      cp_async_4(to, from, inside ? 4 : 0);
    }
  }
}

// Element (row, k) of the A stage and (column, k) of the B stage, rounded to TF32.
__device__ __forceinline__ uint32_t a_tf32(const Stage& stage, int row, int k) {
  return float_to_tf32(stage.a[k * kAStride + row]);
}
__device__ __forceinline__ uint32_t b_tf32(const Stage& stage, int column, int k) {
  return float_to_tf32(stage.b[column * kBStride + k]);
}

// The warp's 4 x 4 instruction tiles += its 64 rows of the A stage times its 32 columns of B, with
// the fragments of kernels/common/mma_sync.cuh (g = lane >> 2, t = lane % 4).
__device__ __forceinline__ void multiply_stage(const Stage& stage, int warp_m, int warp_n,
                                               float (&acc)[kWarpTilesM][kWarpTilesN][4]) {
  const int lane = threadIdx.x % warpSize, g = lane >> 2, t = lane % 4;
#pragma unroll
  for (int kk = 0; kk < kTileK; kk += kMmaK) {
    uint32_t a[kWarpTilesM][4], b[kWarpTilesN][2];
#pragma unroll
    for (int i = 0; i < kWarpTilesM; ++i) {
      const int row = warp_m + i * kMmaM + g;
      a[i][0] = a_tf32(stage, row, kk + t);
      a[i][1] = a_tf32(stage, row + 8, kk + t);
      a[i][2] = a_tf32(stage, row, kk + t + 4);
      a[i][3] = a_tf32(stage, row + 8, kk + t + 4);
    }
#pragma unroll
    for (int j = 0; j < kWarpTilesN; ++j) {
      const int col = warp_n + j * kMmaN + g;
      b[j][0] = b_tf32(stage, col, kk + t);
      b[j][1] = b_tf32(stage, col, kk + t + 4);
    }
#pragma unroll
    for (int i = 0; i < kWarpTilesM; ++i) {
#pragma unroll
      for (int j = 0; j < kWarpTilesN; ++j) mma_m16n8k8_tf32(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
}

__device__ __forceinline__ void zero_accumulators(float (&acc)[kWarpTilesM][kWarpTilesN][4]) {
#pragma unroll
  for (int i = 0; i < kWarpTilesM; ++i) {
#pragma unroll
    for (int j = 0; j < kWarpTilesN; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;
    }
  }
}

// Where accumulator r of instruction tile (i, j) sits in the block's tile: d[r] is
// C(g + 8 (r / 2), 2 t + r % 2) of the 16 x 8 tile.
struct TilePlace {
  int row, col;
};
__device__ __forceinline__ TilePlace accumulator_place(int warp_m, int warp_n, int i, int j,
                                                       int r) {
  const int lane = threadIdx.x % warpSize, g = lane >> 2, t = lane % 4;
  return TilePlace{warp_m + i * kMmaM + g + 8 * (r / 2), warp_n + j * kMmaN + 2 * t + r % 2};
}

// acc = the warp's piece of the block's A B over a reduction of `kdim` values, through the
// three-stage pipeline; load_stage(stage, k0) issues this thread's cp.async copies of reduction
// values [k0, k0 + 16) into `stage` (without committing them).
template <typename LoadStage>
__device__ __forceinline__ void multiply_pipelined(SharedStages& tiles, int kdim,
                                                   const LoadStage& load_stage, int warp_m,
                                                   int warp_n,
                                                   float (&acc)[kWarpTilesM][kWarpTilesN][4]) {
  zero_accumulators(acc);
  const int steps = (kdim + kTileK - 1) / kTileK;
  // Prologue: stages 0 .. kStages - 2 in flight, one commit group each (empty past the end, so
  // the group count per step stays fixed).
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) load_stage(tiles.stages[s], s * kTileK);
    cp_async_commit();
  }
  for (int step = 0; step < steps; ++step) {
    cp_async_wait<kStages - 2>();  // this thread's copies of stage `step` have landed ...
    __syncthreads();  // ... everyone's have, and every warp is done with stage step - 1
    const int next = step + kStages - 1;  // into the stage that step - 1 used
    if (next < steps) load_stage(tiles.stages[next % kStages], next * kTileK);
    cp_async_commit();
    multiply_stage(tiles.stages[step % kStages], warp_m, warp_n, acc);
  }
}

// ---- fprop: rows (n, p, q), columns kout, reduction (c, r, s) ----------------------------------

__global__ void __launch_bounds__(kThreads)
    conv2d_fprop_mma_kernel(Geometry g, const float* __restrict__ x, const float* __restrict__ w,
                            const float* __restrict__ bias, bool b_vectors, float* __restrict__ y) {
  __shared__ SharedStages tiles;
  const int kdim = g.C * g.R * g.S, PQ = g.P * g.Q;
  const int m0 = blockIdx.x * kTileM, n0 = blockIdx.y * kTileN;
  const int warp = threadIdx.x / warpSize;
  const int warp_m = warp / 2 * kWarpM, warp_n = warp % 2 * kWarpN;
  const FpropRow row = fprop_row(g, m0 + threadIdx.x);  // this thread's row of every A stage

  auto load_stage = [&](Stage& stage, int k0) {
#pragma unroll 4
    for (int k = 0; k < kTileK; ++k) {
      copy_or_zero(&stage.a[k * kAStride + threadIdx.x], x, fprop_a_offset(g, row, k0 + k, kdim));
    }
    load_fprop_b(stage.b, w, g.K, kdim, b_vectors, n0, k0);
  };

  float acc[kWarpTilesM][kWarpTilesN][4];
  multiply_pipelined(tiles, kdim, load_stage, warp_m, warp_n, acc);

#pragma unroll
  for (int i = 0; i < kWarpTilesM; ++i) {
#pragma unroll
    for (int j = 0; j < kWarpTilesN; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const TilePlace place = accumulator_place(warp_m, warp_n, i, j, r);
        const int m = m0 + place.row, kout = n0 + place.col;
        if (m >= g.N * PQ || kout >= g.K) continue;
        const int img = m / PQ, pix = m - img * PQ;
        y[(img * g.K + kout) * PQ + pix] = acc[i][j][r] + (bias != nullptr ? bias[kout] : 0.0f);
      }
    }
  }
}

// ---- dgrad: per phase (blockIdx.z), rows (n, i, j), columns c, reduction (kout, tap) -----------

__global__ void __launch_bounds__(kThreads)
    conv2d_dgrad_mma_kernel(Geometry g, const float* __restrict__ dy, const float* __restrict__ w,
                            float* __restrict__ dx) {
  __shared__ SharedStages tiles;
  const DgradPhase phase = dgrad_phase(g, blockIdx.z);
  const int M = g.N * phase.Hp * phase.Wp, kdim = g.K * phase.taps;
  const int m0 = blockIdx.x * kTileM, n0 = blockIdx.y * kTileN;
  if (m0 >= M) return;  // this phase has fewer pixels than the grid was sized for (whole block)
  const int warp = threadIdx.x / warpSize;
  const int warp_m = warp / 2 * kWarpM, warp_n = warp % 2 * kWarpN;
  const DgradRow row = dgrad_row(g, phase, m0 + threadIdx.x);  // this thread's row of A

  auto load_stage = [&](Stage& stage, int k0) {
#pragma unroll 4
    for (int k = 0; k < kTileK; ++k) {
      const int ka = k0 + k;
      copy_or_zero(&stage.a[k * kAStride + threadIdx.x], dy,
                   dgrad_a_offset(g, row, dgrad_tap(phase, ka), ka < kdim));
    }
    // B: k = thread % 16 (one tap decoded per stage), columns thread / 16 + 8 v.
    const int k = threadIdx.x % kTileK, kb = k0 + k;
    const DgradTap tap = dgrad_tap(phase, kb);
    for (int col = threadIdx.x / kTileK; col < kTileN; col += kThreads / kTileK) {
      const int c = n0 + col;
      copy_or_zero(&stage.b[col * kBStride + k], w,
                   dgrad_b_offset(g, tap, c, kb < kdim && c < g.C));
    }
  };

  float acc[kWarpTilesM][kWarpTilesN][4];
  multiply_pipelined(tiles, kdim, load_stage, warp_m, warp_n, acc);  // kdim 0: zeros out

#pragma unroll
  for (int i = 0; i < kWarpTilesM; ++i) {
#pragma unroll
    for (int j = 0; j < kWarpTilesN; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const TilePlace place = accumulator_place(warp_m, warp_n, i, j, r);
        const int m = m0 + place.row, c = n0 + place.col;
        if (m >= M || c >= g.C) continue;
        const DgradRow pixel = dgrad_row(g, phase, m);
        dx[((pixel.n_img * g.C + c) * g.H + pixel.h) * g.W + pixel.w] = acc[i][j][r];
      }
    }
  }
}

// ---- wgrad: rows (c, r, s), columns kout, reduction (n, p, q) split over blockIdx.z -----------

// Partial dW over reduction values [split chunk, min((split + 1) chunk, N P Q)) of split
// blockIdx.z, written (transposed back: dW[kout, crs]) to out + split K C R S.
__global__ void __launch_bounds__(kThreads)
    conv2d_wgrad_mma_kernel(Geometry g, const float* __restrict__ dy, const float* __restrict__ x,
                            int chunk, float* __restrict__ out) {
  __shared__ SharedStages tiles;
  const int crs_total = g.C * g.R * g.S;
  const int k_begin = blockIdx.z * chunk;
  const int k_end = min(k_begin + chunk, g.N * g.P * g.Q);
  const int m0 = blockIdx.x * kTileM, n0 = blockIdx.y * kTileN;
  const int warp = threadIdx.x / warpSize;
  const int warp_m = warp / 2 * kWarpM, warp_n = warp % 2 * kWarpN;

  // Both operands reduction-fast: k = thread % 16, so consecutive threads read consecutive
  // (n, p, q) of x and dy, and each thread decodes one (n, p, q) per stage.
  auto load_stage = [&](Stage& stage, int k0) {
    const int k = threadIdx.x % kTileK;
    const WgradStep step = wgrad_step(g, k_begin + k0 + k, k_end);
    for (int row = threadIdx.x / kTileK; row < kTileM; row += kThreads / kTileK) {
      copy_or_zero(&stage.a[k * kAStride + row], x,
                   wgrad_a_offset(g, step, wgrad_row(g, m0 + row)));
    }
    for (int col = threadIdx.x / kTileK; col < kTileN; col += kThreads / kTileK) {
      copy_or_zero(&stage.b[col * kBStride + k], dy, wgrad_b_offset(g, step, n0 + col));
    }
  };

  float acc[kWarpTilesM][kWarpTilesN][4];
  multiply_pipelined(tiles, max(k_end - k_begin, 0), load_stage, warp_m, warp_n, acc);

  float* dst = out + static_cast<size_t>(blockIdx.z) * g.K * crs_total;
#pragma unroll
  for (int i = 0; i < kWarpTilesM; ++i) {
#pragma unroll
    for (int j = 0; j < kWarpTilesN; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const TilePlace place = accumulator_place(warp_m, warp_n, i, j, r);
        const int crs = m0 + place.row, kout = n0 + place.col;
        if (crs < crs_total && kout < g.K) dst[kout * crs_total + crs] = acc[i][j][r];
      }
    }
  }
}

// wgrad's split of N P Q over this tile's output blocks (split_k.h's rule).
SplitK mma_wgrad_split(const Geometry& g) {
  const int64_t tiles = ceil_div(int64_t(g.C) * g.R * g.S, kTileM) * ceil_div(g.K, kTileN);
  return choose_split_k(int64_t(g.N) * g.P * g.Q, tiles, kTileK);
}

bool aligned_16(const float* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace

void conv2d_fprop_mma_cuda(const Conv2dShape& shape, const float* x, const float* w,
                           const float* bias, float* y) {
  const char* op = "conv2d_fprop_mma_cuda";
  const Geometry g = geometry(shape, op);
  if (g.N == 0) return;
  const bool b_vectors = (g.C * g.R * g.S) % 4 == 0 && aligned_16(w);
  const dim3 grid(blocks_for(int64_t(g.N) * g.P * g.Q, kTileM), blocks_for(g.K, kTileN));
  describe_next_launch({"conv2d_fprop_tf32_mma", conv2d_flops(shape), conv2d_bytes(shape)});
  conv2d_fprop_mma_kernel<<<grid, kThreads, 0, current_stream()>>>(g, x, w, bias, b_vectors, y);
  CUDA_CHECK_LAUNCH(op, " (tf32) N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K,
                    " R=", g.R, " S=", g.S);
}

void conv2d_dgrad_mma_cuda(const Conv2dShape& shape, const float* dy, const float* w, float* dx) {
  const char* op = "conv2d_dgrad_mma_cuda";
  const Geometry g = geometry(shape, op);
  if (g.N == 0 || g.H == 0 || g.W == 0) return;
  check_dgrad_phases(g, op);
  if (g.C <= kDirectDgradDefaultMaxC && g.R * g.S <= kDirectDgradFilterTaps) {
    // A first layer: the direct FP32 kernel, as the WMMA path (the header says why).
    describe_next_launch({"conv2d_dgrad_direct", conv2d_flops(shape), conv2d_bytes(shape)});
    launch_dgrad_direct(g, dy, w, dx, op);
    return;
  }
  // Phase (0, 0) has the most pixels: ceil(H / sh) ceil(W / sw) per image.
  const int64_t rows = int64_t(g.N) * ceil_div(g.H, g.sh) * ceil_div(g.W, g.sw);
  const dim3 grid(blocks_for(rows, kTileM), blocks_for(g.C, kTileN), g.sh * g.sw);
  describe_next_launch({"conv2d_dgrad_tf32_mma", conv2d_flops(shape), conv2d_bytes(shape)});
  conv2d_dgrad_mma_kernel<<<grid, kThreads, 0, current_stream()>>>(g, dy, w, dx);
  CUDA_CHECK_LAUNCH(op, " (tf32) N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K,
                    " R=", g.R, " S=", g.S);
}

int64_t conv2d_wgrad_mma_cuda_workspace_size(const Conv2dShape& shape) {
  const Geometry g = geometry(shape, "conv2d_wgrad_mma_cuda_workspace_size");
  const SplitK split = mma_wgrad_split(g);
  return split.splits > 1 ? int64_t(split.splits) * g.K * g.C * g.R * g.S : 0;
}

void conv2d_wgrad_mma_cuda(const Conv2dShape& shape, const float* dy, const float* x, float* dw,
                           float* db, float* workspace) {
  const char* op = "conv2d_wgrad_mma_cuda";
  const Geometry g = geometry(shape, op);
  if (g.N == 0) {  // an empty reduction: zero gradients, as conv2d_wgrad_cuda writes them
    conv2d_wgrad_cuda(shape, dy, x, dw, db, nullptr);
    return;
  }
  // db sums dy, no product to round: conv2d_wgrad_cuda's FP32 reduction (as the WMMA path).
  if (db != nullptr) conv2d_wgrad_cuda(shape, dy, x, nullptr, db, nullptr);
  if (dw == nullptr) return;
  const SplitK split = mma_wgrad_split(g);
  ENGINE_CHECK(split.splits == 1 || workspace != nullptr, op, ": ", split.splits,
               "-way split-K needs a workspace of conv2d_wgrad_mma_cuda_workspace_size() floats");
  const int crs = g.C * g.R * g.S;
  float* out = split.splits > 1 ? workspace : dw;
  const dim3 grid(blocks_for(crs, kTileM), blocks_for(g.K, kTileN), split.splits);
  describe_next_launch({"conv2d_wgrad_tf32_mma", conv2d_flops(shape), conv2d_bytes(shape)});
  conv2d_wgrad_mma_kernel<<<grid, kThreads, 0, current_stream()>>>(g, dy, x, int(split.chunk), out);
  CUDA_CHECK_LAUNCH(op, " (tf32) N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K,
                    " R=", g.R, " S=", g.S, " splits=", split.splits);
  if (split.splits > 1) launch_sum_splits(workspace, split.splits, g.K * crs, dw);
}

}  // namespace engine::kernels
