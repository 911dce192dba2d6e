// matmul_wgmma_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/matmul/matmul_wgmma.h"

namespace engine::kernels {

void matmul_wgmma_cuda(int64_t, int64_t, int64_t, const float*, const float*, bool, bool, float*,
                       bool, Precision, WgmmaPipeline) {
  no_cuda("matmul_wgmma_cuda");
}

const char* wgmma_unsupported_reason() { return "built without CUDA"; }

void wgmma_m64nNk8_tf32_probe_cuda(int, const float*, const float*, uint32_t, uint32_t, uint32_t,
                                   uint32_t, const float*, bool, float*) {
  no_cuda("wgmma_m64nNk8_tf32_probe_cuda");
}

void wgmma_m64nNk16_bf16_probe_cuda(int, const float*, const float*, uint32_t, uint32_t, uint32_t,
                                    uint32_t, const float*, bool, float*) {
  no_cuda("wgmma_m64nNk16_bf16_probe_cuda");
}

}  // namespace engine::kernels
