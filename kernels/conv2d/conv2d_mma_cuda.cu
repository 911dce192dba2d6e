// conv2d's fprop, dgrad and wgrad on CUDA tensor cores through mma.sync, with a three-stage
// cp.async pipeline: the TF32 and BF16 contracts of conv2d_*_tensor_core_cuda (conv2d.h), a second
// kernel beside the WMMA one (conv2d_tensor_core_cuda.cu). engine::tensor_core_conv()
// (engine/backend.h, ENGINE_TC_CONV=wmma|mma) picks between them under the tf32 and bf16 policies.
//
// Math:    conv2d.h's formulas with both operands of every product rounded as they go from shared
//          memory into registers: to TF32 by cvt.rna (round to nearest, ties away from zero) or to
//          BF16 by cvt.rn.bf16x2 (ties to even, as the WMMA kernels' __float2bfloat16); each
//          product is exact in FP32 and the sums round in FP32, 8 reduction values per
//          instruction in TF32, 16 in BF16. fprop adds the bias once at the end, in FP32; wgrad's
//          db is not a product and stays conv2d_wgrad_cuda's FP32 reduction. The same results class
//          and test bound as the WMMA kernel (tests/ops/conv2d_mma_cuda_test.cpp).
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
// Tile:    kernels/common/mma_tile.cuh, shared with matmul_mma_cuda.cu: block tile 128 (rows) x 64
//          (columns) x 16 (reduction), 128 threads = 4 warps in 2 x 2, each warp 64 x 32 of C as
//          4 x 4 instruction tiles (m16n8k8 TF32, two per stage; m16n8k16 BF16, one), 64 FP32
//          accumulators per thread in the documented layout (kernels/common/mma_sync.cuh),
//          written from registers by the epilogue (no shared C tile, unlike WMMA's).
// Pipeline: three shared-memory stages (46,080 bytes of the 48 KiB static limit: the tile's
//          stages reserve both layouts), as matmul_mma_cuda.cu: while the warps multiply stage s,
//          the copies of s + 1 and s + 2 are in flight; one cp.async.wait_group 1 and one
//          __syncthreads per 16 reduction values, and the stage a step refills is the one every
//          warp finished before that barrier.
// Loads:   A (the gathered activations: x for fprop, dy for dgrad) is stored [16][128 + pad]
//          (reduction-major); thread t copies row t for all 16 reduction values with 4-byte
//          cp.async, so consecutive threads read consecutive pixels, and each thread decodes its
//          row once per kernel. Padding, rows past the end and reduction values past the end are
//          copies with src-size 0 (zeros written, nothing read). B (the weights) is stored
//          [64][16 + 4] (column-major, reduction contiguous): fprop's B[k, kout] = w[kout C R S +
//          k] is contiguous along k, so it moves in 16-byte copies when C R S is a multiple of 4
//          and w 16-byte aligned, else in 4-byte ones; dgrad's B[(kout, tap), c] is strided along
//          both indices (only the phase's taps), so always 4-byte copies, each thread decoding one
//          tap per stage. The paddings put each TF32 instruction's 32 fragment reads in 32
//          different banks (BF16: A's too, with pad 4; B's with a 2-way conflict, mma_tile.cuh).
//          The stages hold FP32 in both precisions, so BF16 moves as many bytes as TF32.
//          wgrad stages both operands reduction-fast (k = thread % 16, 4-byte copies): threads
//          walk x and dy along (n, p, q), and each decodes one (n, p, q) per stage.
// Cost:    2 N K P Q C R S FLOPs per pass (dgrad skips a phase's zero taps). Per block and 16
//          reduction values the tile reads (128 + 64) x 16 floats (12 KiB, mostly L1/L2 hits: an x
//          element is reused by up to R S rows) for 2 x 128 x 64 x 16 = 262 kFLOP, 21.3 FLOP/byte
//          (16 for the WMMA kernel's 64 x 64), and each thread decodes 16 gathered addresses
//          (integer divisions) per stage for 32 mma per warp in TF32 (16 in BF16). Expected: bound
//          by L2 traffic (about 117 TFLOP/s at 5.5 TB/s) and address arithmetic: TF32 at most
//          about 25 % of the dense TF32 peak (495 TFLOP/s, H100 / H200 SXM); BF16 about the same
//          TFLOP/s, at most about 10-12 % of the dense BF16 peak (989 TFLOP/s), its scalar
//          fragment reads alone allowing no more than about a third of it. Above the WMMA kernels,
//          still below cuDNN's (larger tiles, precomputed gather offsets, ldmatrix, BF16 stages).
//          Expected, not measured: no GPU was available when it was written.
// Indexing: 32-bit, as conv2d_cuda.cu (every tensor below 2^31 elements, checked by geometry()).
#include <cstdint>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/device_counters.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/mma_tile.cuh"
#include "kernels/common/split_k.h"
#include "kernels/conv2d/conv2d_geometry.cuh"
#include "kernels/conv2d/conv2d_mma.h"

namespace engine::kernels {

using namespace conv2d_detail;

namespace {

using namespace mma_tile;

static_assert(kThreads == kTileM, "each thread stages one row of A");

// One 4-byte copy of src[offset] into `to`, or zeros when offset < 0 (src itself is passed then:
// a valid address that is not read).
__device__ __forceinline__ void copy_or_zero(float* to, const float* __restrict__ src, int offset) {
  cp_async_4(to, offset >= 0 ? src + offset : src, offset >= 0 ? 4 : 0);
}

// The stage layouts of every pass: A row-contiguous (a[k][row]), B p-contiguous (b[column][k]).
constexpr bool kAPContiguous = false, kBPContiguous = true;

// Element (row, k) of the A stage and (column, k) of the B stage.
template <typename Operands>
__device__ __forceinline__ float* a_at(Stage<Operands>& stage, int row, int k) {
  return &stage.a[staged_index<Operands, kTileM>(kAPContiguous, row, k)];
}
template <typename Operands>
__device__ __forceinline__ float* b_at(Stage<Operands>& stage, int column, int k) {
  return &stage.b[staged_index<Operands, kTileN>(kBPContiguous, column, k)];
}

// ---- fprop: rows (n, p, q), columns kout, reduction (c, r, s) ----------------------------------

template <typename Operands>
__global__ void __launch_bounds__(kThreads)
    conv2d_fprop_mma_kernel(Geometry g, const float* __restrict__ x, const float* __restrict__ w,
                            const float* __restrict__ bias, bool b_vectors, float* __restrict__ y) {
  __shared__ SharedStages<Operands> tiles;
  const int kdim = g.C * g.R * g.S, PQ = g.P * g.Q;
  const int m0 = blockIdx.x * kTileM, n0 = blockIdx.y * kTileN;
  const FpropRow row = fprop_row(g, m0 + threadIdx.x);  // this thread's row of every A stage

  // B[k, kout] = w[kout kdim + k]: the weights are a p-contiguous operand with K rows.
  auto load_stage = [&](Stage<Operands>& stage, int k0) {
#pragma unroll 4
    for (int k = 0; k < kTileK; ++k) {
      copy_or_zero(a_at(stage, threadIdx.x, k), x, fprop_a_offset(g, row, k0 + k, kdim));
    }
    load_operand_stage<Operands, kTileN>(stage.b, w, kBPContiguous, b_vectors, g.K, kdim, n0, k0);
  };

  float acc[kWarpTilesM][kWarpTilesN][4];
  multiply_pipelined<Operands>(tiles, kdim, load_stage, kAPContiguous, kBPContiguous, acc);
#pragma unroll
  for (int e = 0; e < kAccumulators; ++e) {
    const TilePlace place = accumulator_place(e);
    const int m = m0 + place.row, kout = n0 + place.col;
    if (m >= g.N * PQ || kout >= g.K) continue;
    const int img = m / PQ, pix = m - img * PQ;
    y[(img * g.K + kout) * PQ + pix] = accumulator(acc, e) + (bias != nullptr ? bias[kout] : 0.0f);
  }
}

// ---- dgrad: per phase (blockIdx.z), rows (n, i, j), columns c, reduction (kout, tap) -----------

template <typename Operands>
__global__ void __launch_bounds__(kThreads)
    conv2d_dgrad_mma_kernel(Geometry g, const float* __restrict__ dy, const float* __restrict__ w,
                            float* __restrict__ dx) {
  __shared__ SharedStages<Operands> tiles;
  const DgradPhase phase = dgrad_phase(g, blockIdx.z);
  const int M = g.N * phase.Hp * phase.Wp, kdim = g.K * phase.taps;
  const int m0 = blockIdx.x * kTileM, n0 = blockIdx.y * kTileN;
  if (m0 >= M) return;  // this phase has fewer pixels than the grid was sized for (whole block)
  const DgradRow row = dgrad_row(g, phase, m0 + threadIdx.x);  // this thread's row of A

  auto load_stage = [&](Stage<Operands>& stage, int k0) {
#pragma unroll 4
    for (int k = 0; k < kTileK; ++k) {
      const int ka = k0 + k;
      copy_or_zero(a_at(stage, threadIdx.x, k), dy,
                   dgrad_a_offset(g, row, dgrad_tap(phase, ka), ka < kdim));
    }
    // B: k = thread % 16 (one tap decoded per stage), columns thread / 16 + 8 v.
    const int k = threadIdx.x % kTileK, kb = k0 + k;
    const DgradTap tap = dgrad_tap(phase, kb);
    for (int col = threadIdx.x / kTileK; col < kTileN; col += kThreads / kTileK) {
      const int c = n0 + col;
      copy_or_zero(b_at(stage, col, k), w, dgrad_b_offset(g, tap, c, kb < kdim && c < g.C));
    }
  };

  float acc[kWarpTilesM][kWarpTilesN][4];
  // kdim 0: zeros out
  multiply_pipelined<Operands>(tiles, kdim, load_stage, kAPContiguous, kBPContiguous, acc);
#pragma unroll
  for (int e = 0; e < kAccumulators; ++e) {
    const TilePlace place = accumulator_place(e);
    const int m = m0 + place.row, c = n0 + place.col;
    if (m >= M || c >= g.C) continue;
    const DgradRow pixel = dgrad_row(g, phase, m);
    dx[((pixel.n_img * g.C + c) * g.H + pixel.h) * g.W + pixel.w] = accumulator(acc, e);
  }
}

// ---- wgrad: rows (c, r, s), columns kout, reduction (n, p, q) split over blockIdx.z -----------

// Partial dW over reduction values [split chunk, min((split + 1) chunk, N P Q)) of split
// blockIdx.z, written (transposed back: dW[kout, crs]) to out + split K C R S.
template <typename Operands>
__global__ void __launch_bounds__(kThreads)
    conv2d_wgrad_mma_kernel(Geometry g, const float* __restrict__ dy, const float* __restrict__ x,
                            int chunk, float* __restrict__ out) {
  __shared__ SharedStages<Operands> tiles;
  const int crs_total = g.C * g.R * g.S;
  const int k_begin = blockIdx.z * chunk;
  const int k_end = min(k_begin + chunk, g.N * g.P * g.Q);
  const int m0 = blockIdx.x * kTileM, n0 = blockIdx.y * kTileN;

  // Both operands reduction-fast: k = thread % 16, so consecutive threads read consecutive
  // (n, p, q) of x and dy, and each thread decodes one (n, p, q) per stage.
  auto load_stage = [&](Stage<Operands>& stage, int k0) {
    const int k = threadIdx.x % kTileK;
    const WgradStep step = wgrad_step(g, k_begin + k0 + k, k_end);
    for (int row = threadIdx.x / kTileK; row < kTileM; row += kThreads / kTileK) {
      copy_or_zero(a_at(stage, row, k), x, wgrad_a_offset(g, step, wgrad_row(g, m0 + row)));
    }
    for (int col = threadIdx.x / kTileK; col < kTileN; col += kThreads / kTileK) {
      copy_or_zero(b_at(stage, col, k), dy, wgrad_b_offset(g, step, n0 + col));
    }
  };

  float acc[kWarpTilesM][kWarpTilesN][4];
  multiply_pipelined<Operands>(tiles, max(k_end - k_begin, 0), load_stage, kAPContiguous,
                               kBPContiguous, acc);
  float* dst = out + static_cast<size_t>(blockIdx.z) * g.K * crs_total;
#pragma unroll
  for (int e = 0; e < kAccumulators; ++e) {
    const TilePlace place = accumulator_place(e);
    const int crs = m0 + place.row, kout = n0 + place.col;
    if (crs < crs_total && kout < g.K) dst[kout * crs_total + crs] = accumulator(acc, e);
  }
}

// wgrad's split of N P Q over this tile's output blocks (split_k.h's rule).
SplitK mma_wgrad_split(const Geometry& g) {
  const int64_t tiles = ceil_div(int64_t(g.C) * g.R * g.S, kTileM) * ceil_div(g.K, kTileN);
  return choose_split_k(int64_t(g.N) * g.P * g.Q, tiles, kTileK);
}

bool aligned_16(const float* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

// The operand name of the launch labels; refuses Fp32 (the strict kernels are conv2d_cuda.cu's).
const char* operand_name(Precision precision, const char* op) {
  ENGINE_CHECK(precision != Precision::Fp32, op,
               ": fp32 has no mma.sync kernel (conv2d_*_cuda are strict FP32)");
  return precision == Precision::Tf32 ? Tf32Operands::kName : Bf16Operands::kName;
}

}  // namespace

void conv2d_fprop_mma_cuda(const Conv2dShape& shape, const float* x, const float* w,
                           const float* bias, float* y, Precision precision) {
  const char* op = "conv2d_fprop_mma_cuda";
  const char* operands = operand_name(precision, op);
  const Geometry g = geometry(shape, op);
  if (g.N == 0) return;
  const bool b_vectors = (g.C * g.R * g.S) % 4 == 0 && aligned_16(w);
  const dim3 grid(blocks_for(int64_t(g.N) * g.P * g.Q, kTileM), blocks_for(g.K, kTileN));
  const bool tf32 = precision == Precision::Tf32;
  describe_next_launch({tf32 ? "conv2d_fprop_tf32_mma" : "conv2d_fprop_bf16_mma",
                        conv2d_flops(shape), conv2d_bytes(shape)});
  if (tf32) {
    conv2d_fprop_mma_kernel<Tf32Operands>
        <<<grid, kThreads, 0, current_stream()>>>(g, x, w, bias, b_vectors, y);
  } else {
    conv2d_fprop_mma_kernel<Bf16Operands>
        <<<grid, kThreads, 0, current_stream()>>>(g, x, w, bias, b_vectors, y);
  }
  CUDA_CHECK_LAUNCH(op, " (", operands, ") N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K,
                    " R=", g.R, " S=", g.S);
}

void conv2d_dgrad_mma_cuda(const Conv2dShape& shape, const float* dy, const float* w, float* dx,
                           Precision precision) {
  const char* op = "conv2d_dgrad_mma_cuda";
  const char* operands = operand_name(precision, op);
  const Geometry g = geometry(shape, op);
  if (g.N == 0 || g.H == 0 || g.W == 0) return;
  check_dgrad_phases(g, op);
  if (launch_dgrad_direct_for_first_layer(shape, g, dy, w, dx, op)) return;
  // Phase (0, 0) has the most pixels: ceil(H / sh) ceil(W / sw) per image.
  const int64_t rows = int64_t(g.N) * ceil_div(g.H, g.sh) * ceil_div(g.W, g.sw);
  const dim3 grid(blocks_for(rows, kTileM), blocks_for(g.C, kTileN), g.sh * g.sw);
  const bool tf32 = precision == Precision::Tf32;
  describe_next_launch({tf32 ? "conv2d_dgrad_tf32_mma" : "conv2d_dgrad_bf16_mma",
                        conv2d_flops(shape), conv2d_bytes(shape)});
  if (tf32) {
    conv2d_dgrad_mma_kernel<Tf32Operands><<<grid, kThreads, 0, current_stream()>>>(g, dy, w, dx);
  } else {
    conv2d_dgrad_mma_kernel<Bf16Operands><<<grid, kThreads, 0, current_stream()>>>(g, dy, w, dx);
  }
  CUDA_CHECK_LAUNCH(op, " (", operands, ") N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K,
                    " R=", g.R, " S=", g.S);
}

int64_t conv2d_wgrad_mma_cuda_workspace_size(const Conv2dShape& shape) {
  const Geometry g = geometry(shape, "conv2d_wgrad_mma_cuda_workspace_size");
  const SplitK split = mma_wgrad_split(g);
  return split.splits > 1 ? int64_t(split.splits) * g.K * g.C * g.R * g.S : 0;
}

void conv2d_wgrad_mma_cuda(const Conv2dShape& shape, const float* dy, const float* x, float* dw,
                           float* db, float* workspace, Precision precision) {
  const char* op = "conv2d_wgrad_mma_cuda";
  const char* operands = operand_name(precision, op);
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
  const bool tf32 = precision == Precision::Tf32;
  describe_next_launch({tf32 ? "conv2d_wgrad_tf32_mma" : "conv2d_wgrad_bf16_mma",
                        conv2d_flops(shape), conv2d_bytes(shape)});
  if (tf32) {
    conv2d_wgrad_mma_kernel<Tf32Operands>
        <<<grid, kThreads, 0, current_stream()>>>(g, dy, x, int(split.chunk), out);
  } else {
    conv2d_wgrad_mma_kernel<Bf16Operands>
        <<<grid, kThreads, 0, current_stream()>>>(g, dy, x, int(split.chunk), out);
  }
  CUDA_CHECK_LAUNCH(op, " (", operands, ") N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K,
                    " R=", g.R, " S=", g.S, " splits=", split.splits);
  if (split.splits > 1) launch_sum_splits(workspace, split.splits, g.K * crs, dw);
}

}  // namespace engine::kernels
