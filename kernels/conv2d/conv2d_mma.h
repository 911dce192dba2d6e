// The TF32 and BF16 convolutions on mma.sync with a cp.async pipeline (conv2d_mma_cuda.cu), beside
// the WMMA ones (conv2d_*_tensor_core_cuda, conv2d_tensor_core_cuda.cu); engine::tensor_core_conv()
// (engine/backend.h, ENGINE_TC_CONV) picks between them under the tf32 and bf16 policies.
#pragma once

#include <cstdint>

#include "kernels/conv2d/conv2d.h"

namespace engine::kernels {

// conv2d_fprop_tensor_core_cuda's and conv2d_dgrad_tensor_core_cuda's contracts (conv2d.h) in
// `precision`, Tf32 or Bf16 (Fp32 is refused): every product's operands rounded to TF32 (cvt.rna)
// or BF16 (ties to even, as __float2bfloat16), FP32 accumulation, fprop's bias added in FP32,
// dgrad with C <= 4 on the direct FP32 kernel. Device pointers, the current stream. Tile,
// pipeline and costs: conv2d_mma_cuda.cu.
void conv2d_fprop_mma_cuda(const Conv2dShape& shape, const float* x, const float* w,
                           const float* bias, float* y, Precision precision);
void conv2d_dgrad_mma_cuda(const Conv2dShape& shape, const float* dy, const float* w, float* dx,
                           Precision precision);
// conv2d_wgrad_tensor_core_cuda's contract in `precision`: dW on mma.sync with its N P Q
// reduction split over blocks (split_k.h's rule on this kernel's tiles, the same in both
// precisions) and the partial sums added in split order; db (may be nullptr, as dw) is
// conv2d_wgrad_cuda's FP32 sum. `workspace` holds conv2d_wgrad_mma_cuda_workspace_size(shape)
// floats (may be nullptr when that is 0).
int64_t conv2d_wgrad_mma_cuda_workspace_size(const Conv2dShape& shape);
void conv2d_wgrad_mma_cuda(const Conv2dShape& shape, const float* dy, const float* x, float* dw,
                           float* db, float* workspace, Precision precision);

}  // namespace engine::kernels
