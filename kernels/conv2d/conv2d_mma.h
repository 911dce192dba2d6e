// The TF32 convolutions on mma.sync with a cp.async pipeline (conv2d_mma_cuda.cu), beside the WMMA
// ones (conv2d_*_tensor_core_cuda, conv2d_tensor_core_cuda.cu); engine::tensor_core_conv()
// (engine/backend.h, ENGINE_TC_CONV) picks between them under the tf32 precision policy.
#pragma once

#include "kernels/conv2d/conv2d.h"

namespace engine::kernels {

// conv2d_fprop_tensor_core_cuda's and conv2d_dgrad_tensor_core_cuda's contracts with
// Precision::Tf32 (conv2d.h): every product's operands rounded to TF32 (cvt.rna), FP32
// accumulation, fprop's bias added in FP32, dgrad with C <= 4 on the direct FP32 kernel. Device
// pointers, the current stream. Tile, pipeline and costs: conv2d_mma_cuda.cu. (No wgrad yet: the
// WMMA one serves both choices.)
void conv2d_fprop_mma_cuda(const Conv2dShape& shape, const float* x, const float* w,
                           const float* bias, float* y);
void conv2d_dgrad_mma_cuda(const Conv2dShape& shape, const float* dy, const float* w, float* dx);

}  // namespace engine::kernels
