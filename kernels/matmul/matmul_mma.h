// The TF32 and BF16 GEMM on mma.sync with a cp.async pipeline (matmul_mma_cuda.cu), and the
// one-instruction probes that the layout test runs (tests/kernels/mma_sync_test.cpp). Beside the
// WMMA GEMM (matmul_tensor_core_cuda.cu); engine::tensor_core_gemm() (engine/backend.h,
// ENGINE_TC_GEMM) picks between them for matmul under the tf32 and bf16 precision policies.
#pragma once

#include <cstdint>

#include "kernels/common/precision.h"

namespace engine::kernels {

// matmul_tensor_core_cuda's contract (kernels/matmul/matmul.h) in `precision`, Tf32 or Bf16 (Fp32
// is refused): C (+)= op(A) op(B) with every operand rounded to TF32 (cvt.rna) or to BF16 (ties to
// even, as __float2bfloat16) and FP32 accumulation; device pointers, the current stream. Tile,
// pipeline and costs: matmul_mma_cuda.cu.
void matmul_mma_cuda(int64_t m, int64_t n, int64_t k, const float* a, const float* b, bool trans_a,
                     bool trans_b, float* c, bool accumulate, Precision precision);

// One mma.sync.m16n8k8 TF32 by one warp, with no layout of its own: lane l's registers are
// a_registers[4 l + i] (i < 4), b_registers[2 l + i] (i < 2) and c_registers[4 l + i], each A and
// B value rounded to TF32 by cvt.rna in the kernel; d_registers[4 l + i] receives its d[i]. Where
// each matrix element sits is the caller's business (kernels/common/mma_sync.cuh lists the PTX
// ISA's layout), so the test that fills and reads these arrays checks the instruction's layout.
// Device pointers of 128, 64, 128 and 128 floats.
void mma_m16n8k8_tf32_registers_cuda(const float* a_registers, const float* b_registers,
                                     const float* c_registers, float* d_registers);

// The same for one mma.sync.m16n8k16 with BF16 operands: lane l's A register i packs
// a_registers[8 l + 2 i] (low half) and a_registers[8 l + 2 i + 1] (high half), B register i
// b_registers[4 l + 2 i] and [4 l + 2 i + 1], each rounded to BF16 by cvt.rn.bf16x2; c and d as
// above. Device pointers of 256, 128, 128 and 128 floats.
void mma_m16n8k16_bf16_registers_cuda(const float* a_registers, const float* b_registers,
                                      const float* c_registers, float* d_registers);

}  // namespace engine::kernels
