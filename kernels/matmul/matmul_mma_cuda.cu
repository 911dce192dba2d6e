// matmul on CUDA tensor cores through mma.sync, with a three-stage cp.async pipeline: C (+)= op(A)
// op(B) with TF32 or BF16 operands and FP32 accumulation. The WMMA version with a register
// pipeline is matmul_tensor_core_cuda.cu; ENGINE_TC_GEMM=wmma|mma (engine/backend.h) picks one for
// matmul under the tf32 and bf16 policies (wmma by default until a GPU has timed this one).
//
// Math:    C[i, j] (+)= sum_p r(op(A)[i, p]) r(op(B)[p, j]), r rounding each operand when it goes
//          from shared memory into registers: to TF32 by cvt.rna (round to nearest, ties away
//          from zero), or to BF16 by cvt.rn.bf16x2 (to nearest, ties to even, as the WMMA kernel's
//          __float2bfloat16). Each product is exact in FP32 and the sums round in FP32, 8 p per
//          instruction in TF32, 16 in BF16. With `accumulate`, C's old value is added once at the
//          end, in FP32. The same contract and test bound as the WMMA kernel
//          (tests/ops/matmul_mma_cuda_test.cpp).
// Tile:    kernels/common/mma_tile.cuh: block tile 128 (rows of C) x 64 (columns) x 16 (p), 128
//          threads = 4 warps in 2 x 2, each warp a 64 x 32 piece of C as 4 x 4 instruction tiles
//          (m16n8k8 TF32, two per 16 p; m16n8k16 BF16, one), 64 FP32 accumulators per thread in
//          the documented layout, written straight to C from registers by the epilogue.
// Pipeline: three stages of shared memory (46,080 bytes of the 48 KiB static limit, both
//          precisions): while the warps multiply stage s, the copies of stages s + 1 and s + 2
//          are in flight (cp.async, global -> shared without registers); one cp.async.wait_group
//          1 and one __syncthreads per 16 p.
// Loads:   an operand's stage keeps its layout in global memory: p-contiguous [rows][16 + 4] (A
//          untransposed, B transposed) or row-contiguous [16][rows + pad] (A^T, B untransposed;
//          pad 8 in TF32, 4 in BF16: the fragment reads' banks, mma_tile.cuh). A copy moves 16
//          bytes (cp.async.cg) when the operand's contiguous length is a multiple of 4 floats and
//          its pointer 16-byte aligned, else 4 bytes (cp.async.ca); copies outside the operand
//          write zeros, so odd M, N and K need no other edge code. The stages hold FP32 in both
//          precisions (cp.async cannot convert), so BF16 moves as many bytes as TF32.
// Cost:    2 m n k FLOPs; 4 (m k + k n + m n) bytes at least. Per block and 16 p it reads 12 KiB
//          for 262 kFLOP (21.3 FLOP/byte, against 16 for the WMMA kernel's 64 x 64 tile), so it
//          is bound by L2 bandwidth rather than the tensor cores: at 5.5 TB/s of L2 an H100 or
//          H200 would feed it about 117 TFLOP/s. Expected: TF32 at most about 25 % of the dense
//          TF32 peak (495 TFLOP/s, H100 / H200 SXM); BF16 the same TFLOP/s, at most about 12 % of
//          the dense BF16 peak (989 TFLOP/s) -- and its scalar fragment reads (48 shared loads per
//          thread per 16 p, 2-way bank conflicts in the p-contiguous layout) would hold it to
//          about a third of that peak even with the L2 traffic gone. Above the WMMA kernel's
//          register pipeline, below cuBLAS (128 x 256 tiles, ldmatrix, BF16 stages, 4+ stages in
//          dynamic shared memory). Expected, not measured: no GPU was available when it was
//          written.
// Indexing: 32-bit within each matrix (each < 2^31 elements, checked).
#include <climits>
#include <cstdint>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/mma_sync.cuh"
#include "kernels/common/mma_tile.cuh"
#include "kernels/matmul/matmul_mma.h"

namespace engine::kernels {

namespace {

using namespace mma_tile;

constexpr int kWarpLanes = 32;  // warpSize, which host code cannot read under nvcc

// Block (x, y) computes the 128 x 64 tile (y, x) of C.
template <typename Operands>
__global__ void __launch_bounds__(kThreads)
    mma_gemm_kernel(int m, int n, int k, const float* __restrict__ a, const float* __restrict__ b,
                    bool trans_a, bool trans_b, bool a_vectors, bool b_vectors,
                    float* __restrict__ c, bool accumulate) {
  __shared__ SharedStages<Operands> tiles;
  const int m0 = blockIdx.y * kTileM, n0 = blockIdx.x * kTileN;
  // op(A) is p-contiguous when A is stored [m, k]; op(B) when B is stored transposed [n, k].
  const bool a_p_contiguous = !trans_a, b_p_contiguous = trans_b;
  const auto load_stage = [&](Stage<Operands>& stage, int k0) {
    load_operand_stage<Operands, kTileM>(stage.a, a, a_p_contiguous, a_vectors, m, k, m0, k0);
    load_operand_stage<Operands, kTileN>(stage.b, b, b_p_contiguous, b_vectors, n, k, n0, k0);
  };
  float acc[kWarpTilesM][kWarpTilesN][4];
  multiply_pipelined<Operands>(tiles, k, load_stage, a_p_contiguous, b_p_contiguous, acc);
#pragma unroll
  for (int e = 0; e < kAccumulators; ++e) {
    const TilePlace place = accumulator_place(e);
    const int row = m0 + place.row, col = n0 + place.col;
    if (row >= m || col >= n) continue;
    float* out = c + row * n + col;
    *out = accumulate ? *out + accumulator(acc, e) : accumulator(acc, e);
  }
}

// The layout test's instructions: registers in, registers out (matmul_mma.h).
__global__ void mma_tf32_registers_kernel(const float* a_registers, const float* b_registers,
                                          const float* c_registers, float* d_registers) {
  const int lane = threadIdx.x;
  uint32_t a[4], b[2];
  float c[4], d[4];
  for (int i = 0; i < 4; ++i) {
    a[i] = float_to_tf32(a_registers[4 * lane + i]);
    c[i] = c_registers[4 * lane + i];
  }
  for (int i = 0; i < 2; ++i) b[i] = float_to_tf32(b_registers[2 * lane + i]);
  mma_m16n8k8_tf32(d, a, b, c);
  for (int i = 0; i < 4; ++i) d_registers[4 * lane + i] = d[i];
}

__global__ void mma_bf16_registers_kernel(const float* a_registers, const float* b_registers,
                                          const float* c_registers, float* d_registers) {
  const int lane = threadIdx.x;
  uint32_t a[4], b[2];
  float c[4], d[4];
  for (int i = 0; i < 4; ++i) {
    a[i] = pack_bf16x2(a_registers[8 * lane + 2 * i], a_registers[8 * lane + 2 * i + 1]);
    c[i] = c_registers[4 * lane + i];
  }
  for (int i = 0; i < 2; ++i) {
    b[i] = pack_bf16x2(b_registers[4 * lane + 2 * i], b_registers[4 * lane + 2 * i + 1]);
  }
  mma_m16n8k16_bf16(d, a, b, c);
  for (int i = 0; i < 4; ++i) d_registers[4 * lane + i] = d[i];
}

bool aligned_16(const float* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace

void matmul_mma_cuda(int64_t m, int64_t n, int64_t k, const float* a, const float* b, bool trans_a,
                     bool trans_b, float* c, bool accumulate, Precision precision) {
  ENGINE_CHECK(precision != Precision::Fp32,
               "matmul_mma_cuda: fp32 has no mma.sync kernel (matmul_cuda is strict FP32)");
  ENGINE_CHECK(m >= 0 && n >= 0 && k >= 0 && m * k < INT_MAX && k * n < INT_MAX && m * n < INT_MAX,
               "matmul_mma_cuda: m=", m, " n=", n, " k=", k,
               " is negative or needs 64-bit indexing (the kernel indexes in 32 bits)");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C unchanged when accumulating, else zeros
    if (!accumulate) cuda_memset_zero(c, static_cast<size_t>(m * n) * sizeof(float));
    return;
  }
  // 16-byte copies where every row of the stored operand starts 16-byte aligned: A stored [m, k]
  // (k contiguous) or [k, m]; B stored [k, n] or [n, k].
  const bool a_vectors = (trans_a ? m : k) % 4 == 0 && aligned_16(a);
  const bool b_vectors = (trans_b ? k : n) % 4 == 0 && aligned_16(b);
  const dim3 grid(static_cast<unsigned>(ceil_div(n, kTileN)),
                  static_cast<unsigned>(ceil_div(m, kTileM)));
  ENGINE_CHECK(grid.y <= 65535, "matmul_mma_cuda: m=", m, " has too many row tiles for the grid");
  const bool tf32 = precision == Precision::Tf32;
  if (tf32) {
    mma_gemm_kernel<Tf32Operands><<<grid, kThreads, 0, current_stream()>>>(
        int(m), int(n), int(k), a, b, trans_a, trans_b, a_vectors, b_vectors, c, accumulate);
  } else {
    mma_gemm_kernel<Bf16Operands><<<grid, kThreads, 0, current_stream()>>>(
        int(m), int(n), int(k), a, b, trans_a, trans_b, a_vectors, b_vectors, c, accumulate);
  }
  CUDA_CHECK_LAUNCH("matmul_mma_cuda (", tf32 ? Tf32Operands::kName : Bf16Operands::kName,
                    ") m=", m, " n=", n, " k=", k, " trans_a=", trans_a, " trans_b=", trans_b);
}

void mma_m16n8k8_tf32_registers_cuda(const float* a_registers, const float* b_registers,
                                     const float* c_registers, float* d_registers) {
  mma_tf32_registers_kernel<<<1, kWarpLanes, 0, current_stream()>>>(a_registers, b_registers,
                                                                    c_registers, d_registers);
  CUDA_CHECK_LAUNCH("mma_m16n8k8_tf32_registers_cuda");
}

void mma_m16n8k16_bf16_registers_cuda(const float* a_registers, const float* b_registers,
                                      const float* c_registers, float* d_registers) {
  mma_bf16_registers_kernel<<<1, kWarpLanes, 0, current_stream()>>>(a_registers, b_registers,
                                                                    c_registers, d_registers);
  CUDA_CHECK_LAUNCH("mma_m16n8k16_bf16_registers_cuda");
}

}  // namespace engine::kernels
