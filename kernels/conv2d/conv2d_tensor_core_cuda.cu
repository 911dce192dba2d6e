// conv2d on CUDA tensor cores: our implicit-GEMM fprop, dgrad and wgrad with TF32 or BF16 operands
// and FP32 accumulation, through WMMA (nvcuda::wmma): TF32 as m16n16k8 (precision::tf32), BF16 as
// m16n16k16 (__nv_bfloat16). The strict-FP32 kernels are conv2d_cuda.cu; conv2d_*_tensor_core_cuda
// pick by the precision policy (kernels/common/precision.h), as matmul_tensor_core_cuda does for
// the GEMM. One kernel body per pass serves both precisions: conv2d_<pass>_tensor_core_kernel
// <Operands>, Operands being kernels/common/tensor_core_tile.cuh's Tf32Operands or Bf16Operands
// (the staged type, the instruction's depth, the rounding). The tile, its stages, the multiply,
// the register-staged main loop and the trip to the shared C tile are that header's, shared with
// the tensor-core GEMM; this file has each pass's loaders (the index math) and epilogue.
//
// Math:    conv2d.h's formulas with every product's two operands first rounded: TF32 by cvt.rna
//          (10 mantissa bits, round to nearest, ties away from zero), BF16 by __float2bfloat16
//          (7 mantissa bits, round to nearest, ties to even). A product of two rounded values
//          (at most 22 or 16 significant bits) is exact in FP32 and the sums round in FP32.
//          fprop adds the bias once at the end, in FP32; wgrad's db is not a product and stays
//          conv2d_wgrad_cuda's FP32 reduction. Output FP32 in both modes.
// Layout:  x NCHW, w KCRS, y/dy NKPQ, contiguous f32 (in both modes: BF16 is made on the way into
//          shared memory), device pointers; launched on current_stream(), no host sync.
// GEMMs:   the three passes are conv2d_cuda.cu's implicit GEMMs C[M, Ncols] = sum_k A[m, k] B[k, n]
//          (fprop: rows N P Q, columns K, reduction C R S; dgrad per stride phase: rows N Hp Wp,
//          columns C, reduction K x the phase's valid taps; wgrad, dW transposed: rows C R S,
//          columns K, reduction N P Q), with the same index math (conv2d_geometry.cuh: fprop_a,
//          dgrad_a / dgrad_b, wgrad_a / wgrad_b); only the tile differs. dgrad with C <= 4 keeps
//          the direct FP32 kernel in both modes (launch_dgrad_direct_for_first_layer, as
//          conv2d_dgrad_cuda): a tile would use 4 of its 64 columns at most, and strict FP32 there
//          is at least as accurate as TF32 or BF16.
// Tile:    tensor_core_tile.cuh's: 64 (rows) x 64 (columns) x 16 (reduction per step), 128
//          threads = 4 warps in 2 x 2 of 32 x 32 (2 x 2 fragments of 16 x 16). A step is two
//          m16n16k8 instructions per fragment pair in TF32, one m16n16k16 in BF16: the same
//          16-deep step, so the loaders, the grid and wgrad's split are the same in both modes.
//          Shared memory: two stages of A [16][64 + pad] (k-major, matrix_a col_major) and
//          B [16][64 + pad] (matrix_b row_major), pad 16 bytes, plus a float C tile [64][64 + 4]
//          stored column-major (c[column][row]) for the epilogue: 34,816 bytes in TF32, 26,624 in
//          BF16.
// Pipeline: two stages through registers (tensor_core_tile.cuh's multiply_pipelined): each thread
//          loads its 8 values of A and 8 of B for the next step from global memory into float
//          registers while the warps multiply the current stage, then rounds them to the operand
//          type into the other stage; one __syncthreads per step. No cp.async yet (issue 33's
//          next step).
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
//          conv2d_cuda.cu); compulsory bytes 4 (N C H W + K C R S + N K P Q) in both modes (FP32
//          tensors). Per block and step the tile reads 2 x 64 x 16 floats (8 KiB, from L1/L2: an x
//          element is reused by up to R S rows) for 2 x 64 x 64 x 16 = 131 kFLOP, 16 FLOP/byte,
//          and each thread decodes 8 gathered addresses (integer divisions) per operand per step.
//          Expected: bound by L2 traffic and address arithmetic well before the tensor cores.
//          TF32: at most about 20-30 % of the dense TF32 peak (495 TFLOP/s on an H100 / H200 SXM),
//          several times our FFMA kernels on the large layers but below cuDNN's TF32 kernels
//          (larger tiles, cp.async). BF16: the same bytes and address work per FLOP (the operands
//          are FP32 in memory), so about the same TFLOP/s as TF32, which is at most about 10-15 %
//          of the dense BF16 peak (989 TFLOP/s); BF16 halves only the shared-memory traffic and
//          the instruction count. What BF16 would gain needs larger tiles, cp.async and BF16
//          tensors in memory. Not measured: no GPU was available when either was written.
// Indexing: 32-bit, as conv2d_cuda.cu (every tensor below 2^31 elements, checked).
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/device_counters.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/split_k.h"
#include "kernels/common/tensor_core_tile.cuh"
#include "kernels/conv2d/conv2d.h"
#include "kernels/conv2d/conv2d_geometry.cuh"

namespace engine::kernels {

using namespace conv2d_detail;

namespace {

using namespace tensor_core_tile;

// ---- fprop: rows (n, p, q), columns kout, reduction (c, r, s) ----------------------------------

template <typename Operands>
__global__ void __launch_bounds__(kThreads)
    conv2d_fprop_tensor_core_kernel(Geometry g, const float* __restrict__ x,
                                    const float* __restrict__ w, const float* __restrict__ bias,
                                    float* __restrict__ y) {
  __shared__ SharedTiles<Operands> tiles;
  const int kdim = g.C * g.R * g.S, PQ = g.P * g.Q;
  const int m0 = blockIdx.x * kTile, n0 = blockIdx.y * kTile;
  const FpropRow row = fprop_row(g, m0 + row_fast_row());  // A row-fast: the row is fixed
  auto load_step = [&](int step, float(&a_values)[kValues], float(&b_values)[kValues]) {
    const int k0 = step * kTileK, k = k0 + k_fast_k();
#pragma unroll
    for (int v = 0; v < kValues; ++v) {
      a_values[v] = fprop_a(g, x, row, k0 + row_fast_k(v), kdim);
      const int kout = n0 + k_fast_row(v);  // B[k, kout] = w[kout, c, r, s]
      b_values[v] = k < kdim && kout < g.K ? w[kout * kdim + k] : 0.0f;
    }
  };
  Accumulator<Operands> acc[2][2];
  multiply_pipelined<Operands>(tiles, (kdim + kTileK - 1) / kTileK, /*a_k_fast=*/false,
                               /*b_k_fast=*/true, load_step, acc);

  accumulators_to_shared<Operands>(acc, /*column_major=*/true, tiles.c);
  for (int e = threadIdx.x; e < kTile * kTile; e += kThreads) {
    const int m = m0 + e % kTile, kout = n0 + e / kTile;
    if (m >= g.N * PQ || kout >= g.K) continue;
    const int img = m / PQ, pix = m - img * PQ;
    y[(img * g.K + kout) * PQ + pix] =
        tiles.c[e / kTile][e % kTile] + (bias != nullptr ? bias[kout] : 0.0f);
  }
}

// ---- dgrad: per phase (blockIdx.z), rows (n, i, j), columns c, reduction (kout, tap) -----------

template <typename Operands>
__global__ void __launch_bounds__(kThreads)
    conv2d_dgrad_tensor_core_kernel(Geometry g, const float* __restrict__ dy,
                                    const float* __restrict__ w, float* __restrict__ dx) {
  __shared__ SharedTiles<Operands> tiles;
  const DgradPhase phase = dgrad_phase(g, blockIdx.z);
  const int M = g.N * phase.Hp * phase.Wp, kdim = g.K * phase.taps;
  const int m0 = blockIdx.x * kTile, n0 = blockIdx.y * kTile;
  if (m0 >= M) return;  // this phase has fewer pixels than the grid was sized for (whole block)
  const DgradRow row = dgrad_row(g, phase, m0 + row_fast_row());  // A row-fast
  auto load_step = [&](int step, float(&a_values)[kValues], float(&b_values)[kValues]) {
    const int k0 = step * kTileK, k = k0 + k_fast_k();
    const DgradTap tap = dgrad_tap(phase, k);  // B k-fast: one tap per step
#pragma unroll
    for (int v = 0; v < kValues; ++v) {
      const int ka = k0 + row_fast_k(v);
      a_values[v] = dgrad_a(g, dy, row, dgrad_tap(phase, ka), ka < kdim);
      const int c = n0 + k_fast_row(v);
      b_values[v] = dgrad_b(g, w, tap, c, k < kdim && c < g.C);
    }
  };
  Accumulator<Operands> acc[2][2];
  // 0 steps for a phase without taps: zeros out.
  multiply_pipelined<Operands>(tiles, (kdim + kTileK - 1) / kTileK, /*a_k_fast=*/false,
                               /*b_k_fast=*/true, load_step, acc);

  accumulators_to_shared<Operands>(acc, /*column_major=*/true, tiles.c);
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
template <typename Operands>
__global__ void __launch_bounds__(kThreads)
    conv2d_wgrad_tensor_core_kernel(Geometry g, const float* __restrict__ dy,
                                    const float* __restrict__ x, int chunk,
                                    float* __restrict__ out) {
  __shared__ SharedTiles<Operands> tiles;
  const int crs_total = g.C * g.R * g.S;
  const int k_begin = blockIdx.z * chunk;
  const int k_end = min(k_begin + chunk, g.N * g.P * g.Q);
  const int m0 = blockIdx.x * kTile, n0 = blockIdx.y * kTile;
  auto load_step = [&](int step, float(&a_values)[kValues], float(&b_values)[kValues]) {
    // Both operands k-fast: one (n, p, q) per thread and step; the rows are decoded as they
    // come (8 of them, too many registers to keep).
    const WgradStep at = wgrad_step(g, k_begin + step * kTileK + k_fast_k(), k_end);
#pragma unroll
    for (int v = 0; v < kValues; ++v) {
      a_values[v] = wgrad_a(g, x, at, wgrad_row(g, m0 + k_fast_row(v)));
      b_values[v] = wgrad_b(g, dy, at, n0 + k_fast_row(v));
    }
  };
  Accumulator<Operands> acc[2][2];
  multiply_pipelined<Operands>(tiles, (k_end - k_begin + kTileK - 1) / kTileK, /*a_k_fast=*/true,
                               /*b_k_fast=*/true, load_step, acc);

  accumulators_to_shared<Operands>(acc, /*column_major=*/true, tiles.c);
  float* dst = out + static_cast<size_t>(blockIdx.z) * g.K * crs_total;
  for (int e = threadIdx.x; e < kTile * kTile; e += kThreads) {
    const int crs = m0 + e % kTile, kout = n0 + e / kTile;
    if (crs < crs_total && kout < g.K) dst[kout * crs_total + crs] = tiles.c[e / kTile][e % kTile];
  }
}

// wgrad's split of N P Q over this tile's output blocks (split_k.h's rule; the same tile and
// step in both precisions).
SplitK tensor_core_wgrad_split(const Geometry& g) {
  const int64_t tiles = ceil_div(int64_t(g.C) * g.R * g.S, kTile) * ceil_div(g.K, kTile);
  return choose_split_k(int64_t(g.N) * g.P * g.Q, tiles, kTileK);
}

// "tf32" or "bf16" for a launch error; Fp32 never gets here (the callers forward it to the
// strict kernels).
const char* operand_name(Precision precision) {
  return precision == Precision::Tf32 ? "tf32" : "bf16";
}

}  // namespace

void conv2d_fprop_tensor_core_cuda(const Conv2dShape& shape, const float* x, const float* w,
                                   const float* bias, float* y, Precision precision) {
  if (precision == Precision::Fp32) return conv2d_fprop_cuda(shape, x, w, bias, y);
  const char* op = "conv2d_fprop_tensor_core_cuda";
  const Geometry g = geometry(shape, op);
  if (g.N == 0) return;
  const bool tf32 = precision == Precision::Tf32;
  const dim3 grid(blocks_for(int64_t(g.N) * g.P * g.Q, kTile), blocks_for(g.K, kTile));
  describe_next_launch(
      {tf32 ? "conv2d_fprop_tf32" : "conv2d_fprop_bf16", conv2d_flops(shape), conv2d_bytes(shape)});
  if (tf32) {
    conv2d_fprop_tensor_core_kernel<Tf32Operands>
        <<<grid, kThreads, 0, current_stream()>>>(g, x, w, bias, y);
  } else {
    conv2d_fprop_tensor_core_kernel<Bf16Operands>
        <<<grid, kThreads, 0, current_stream()>>>(g, x, w, bias, y);
  }
  CUDA_CHECK_LAUNCH(op, " (", operand_name(precision), ") N=", g.N, " C=", g.C, " H=", g.H,
                    " W=", g.W, " K=", g.K, " R=", g.R, " S=", g.S);
}

void conv2d_dgrad_tensor_core_cuda(const Conv2dShape& shape, const float* dy, const float* w,
                                   float* dx, Precision precision) {
  if (precision == Precision::Fp32) return conv2d_dgrad_cuda(shape, dy, w, dx);
  const char* op = "conv2d_dgrad_tensor_core_cuda";
  const Geometry g = geometry(shape, op);
  if (g.N == 0 || g.H == 0 || g.W == 0) return;
  check_dgrad_phases(g, op);
  // A first layer: the direct FP32 kernel, as conv2d_dgrad_cuda (the header says why).
  if (launch_dgrad_direct_for_first_layer(shape, g, dy, w, dx, op)) return;
  const bool tf32 = precision == Precision::Tf32;
  // Phase (0, 0) has the most pixels: ceil(H / sh) ceil(W / sw) per image.
  const int64_t rows = int64_t(g.N) * ceil_div(g.H, g.sh) * ceil_div(g.W, g.sw);
  const dim3 grid(blocks_for(rows, kTile), blocks_for(g.C, kTile), g.sh * g.sw);
  describe_next_launch(
      {tf32 ? "conv2d_dgrad_tf32" : "conv2d_dgrad_bf16", conv2d_flops(shape), conv2d_bytes(shape)});
  if (tf32) {
    conv2d_dgrad_tensor_core_kernel<Tf32Operands>
        <<<grid, kThreads, 0, current_stream()>>>(g, dy, w, dx);
  } else {
    conv2d_dgrad_tensor_core_kernel<Bf16Operands>
        <<<grid, kThreads, 0, current_stream()>>>(g, dy, w, dx);
  }
  CUDA_CHECK_LAUNCH(op, " (", operand_name(precision), ") N=", g.N, " C=", g.C, " H=", g.H,
                    " W=", g.W, " K=", g.K, " R=", g.R, " S=", g.S);
}

int64_t conv2d_wgrad_tensor_core_cuda_workspace_size(const Conv2dShape& shape,
                                                     Precision precision) {
  if (precision == Precision::Fp32) return conv2d_wgrad_cuda_workspace_size(shape);
  const Geometry g = geometry(shape, "conv2d_wgrad_tensor_core_cuda");
  const SplitK split = tensor_core_wgrad_split(g);
  return split.splits > 1 ? int64_t(split.splits) * g.K * g.C * g.R * g.S : 0;
}

void conv2d_wgrad_tensor_core_cuda(const Conv2dShape& shape, const float* dy, const float* x,
                                   float* dw, float* db, float* workspace, Precision precision) {
  if (precision == Precision::Fp32) return conv2d_wgrad_cuda(shape, dy, x, dw, db, workspace);
  const char* op = "conv2d_wgrad_tensor_core_cuda";
  const Geometry g = geometry(shape, op);
  if (g.N == 0) {  // an empty reduction: zero gradients, as conv2d_wgrad_cuda writes them
    conv2d_wgrad_cuda(shape, dy, x, dw, db, nullptr);
    return;
  }
  // db sums dy, no product to round: conv2d_wgrad_cuda's FP32 reduction.
  if (db != nullptr) conv2d_wgrad_cuda(shape, dy, x, nullptr, db, nullptr);
  if (dw == nullptr) return;
  const SplitK split = tensor_core_wgrad_split(g);
  ENGINE_CHECK(split.splits == 1 || workspace != nullptr, op, ": ", split.splits,
               "-way split-K needs a workspace of conv2d_wgrad_tensor_core_cuda_workspace_size() "
               "floats");
  const bool tf32 = precision == Precision::Tf32;
  const int crs = g.C * g.R * g.S;
  float* out = split.splits > 1 ? workspace : dw;
  const dim3 grid(blocks_for(crs, kTile), blocks_for(g.K, kTile), split.splits);
  describe_next_launch(
      {tf32 ? "conv2d_wgrad_tf32" : "conv2d_wgrad_bf16", conv2d_flops(shape), conv2d_bytes(shape)});
  if (tf32) {
    conv2d_wgrad_tensor_core_kernel<Tf32Operands>
        <<<grid, kThreads, 0, current_stream()>>>(g, dy, x, int(split.chunk), out);
  } else {
    conv2d_wgrad_tensor_core_kernel<Bf16Operands>
        <<<grid, kThreads, 0, current_stream()>>>(g, dy, x, int(split.chunk), out);
  }
  CUDA_CHECK_LAUNCH(op, " (", operand_name(precision), ") N=", g.N, " C=", g.C, " H=", g.H,
                    " W=", g.W, " K=", g.K, " R=", g.R, " S=", g.S, " splits=", split.splits);
  if (split.splits > 1) launch_sum_splits(workspace, split.splits, g.K * crs, dw);
}

}  // namespace engine::kernels
