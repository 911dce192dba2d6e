// The TF32 and BF16 GEMM on sm_90a's warpgroup MMA (wgmma) with a cp.async pipeline
// (matmul_wgmma_cuda.cu), and the one-instruction probes that the wgmma layout test runs
// (tests/kernels/wgmma_test.cpp). Beside the WMMA and mma.sync GEMMs; engine::tensor_core_gemm()
// (engine/backend.h, ENGINE_TC_GEMM=wgmma) picks it for matmul under the tf32 and bf16 precision
// policies.
#pragma once

#include <cstdint>

#include "kernels/common/precision.h"

namespace engine::kernels {

// matmul_tensor_core_cuda's contract (kernels/matmul/matmul.h) in `precision`, Tf32 or Bf16 (Fp32
// is refused): C (+)= op(A) op(B) with every operand rounded to TF32 (cvt.rna) or to BF16 (ties to
// even, as __float2bfloat16) and FP32 accumulation; device pointers, the current stream. Needs a
// device of compute capability 9.0 (H100, H200) and a build that compiled the kernel for sm_90a
// (CMAKE_CUDA_ARCHITECTURES with 90): else throws engine::Error naming the device's capability,
// launching nothing. Tile, pipeline and costs: matmul_wgmma_cuda.cu.
// The two pipelines, both compiled in, chosen per call (ENGINE_TC_GEMM=wgmma or wgmma-overlap,
// engine/backend.h), so that one GPU run can time them side by side:
//   kSerial      every step waits for its own multiply (wgmma.wait_group 0): TF32 3 stages,
//                BF16 2 FP32 + 2 BF16 stages, 48 KiB of shared memory;
//   kOverlapped  one multiply stays in flight across a step (wait_group 1), so the tensor cores
//                run while the next stage is rounded or converted: TF32 4 stages (64 KiB), BF16
//                3 FP32 + 3 BF16 stages (72 KiB), past 48 KiB by the dynamic-shared-memory
//                opt-in.
enum class WgmmaPipeline { kSerial, kOverlapped };

void matmul_wgmma_cuda(int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                       bool trans_a, bool trans_b, float* c, bool accumulate, Precision precision,
                       WgmmaPipeline pipeline = WgmmaPipeline::kSerial);

// Why matmul_wgmma_cuda would refuse this device, or "" when it can run here.
const char* wgmma_unsupported_reason();

// Floats of each operand image the probe copies into shared memory (8 KiB each).
constexpr int kWgmmaProbeImageFloats = 2048;

// One wgmma.mma_async.m64nNk8.f32.tf32.tf32 (n = 8, 16 or 128) by one warpgroup, with no layout
// of its own: a_image and b_image (kWgmmaProbeImageFloats floats each, device memory) are copied
// as they are into two 128-byte aligned shared arrays, and the instruction reads A and B through
// descriptors that start at each array with the byte offsets given (no swizzle). Where each matrix
// element sits in the images is the caller's business (kernels/common/wgmma.cuh lists the PTX
// ISA's layout), so the test that fills them checks the instruction's layout. Thread t's
// accumulators are c_registers[(n / 2) t + i] before and d_registers[(n / 2) t + i] after (128 n /
// 2 floats each); scale_d false computes D = A B. The values are copied as they are: wgmma itself
// truncates them to TF32.
void wgmma_m64nNk8_tf32_probe_cuda(int n, const float* a_image, const float* b_image,
                                   uint32_t a_leading_byte_offset, uint32_t a_stride_byte_offset,
                                   uint32_t b_leading_byte_offset, uint32_t b_stride_byte_offset,
                                   const float* c_registers, bool scale_d, float* d_registers);

// Elements of each operand image the BF16 probe converts into shared memory (8 KiB of BF16 each).
constexpr int kWgmmaBf16ProbeImageElements = 4096;

// The same for one wgmma.mma_async.m64nNk16.f32.bf16.bf16 (n = 8, 16 or 128; A 64 x 16 and B
// 16 x n, both K-major): a_image and b_image are kWgmmaBf16ProbeImageElements floats each,
// element i converted to BF16 (ties to even) and stored as BF16 element i (byte 2 i) of its shared
// array, so the caller lays the images out in BF16 elements. Registers as above.
void wgmma_m64nNk16_bf16_probe_cuda(int n, const float* a_image, const float* b_image,
                                    uint32_t a_leading_byte_offset, uint32_t a_stride_byte_offset,
                                    uint32_t b_leading_byte_offset, uint32_t b_stride_byte_offset,
                                    const float* c_registers, bool scale_d, float* d_registers);

}  // namespace engine::kernels
