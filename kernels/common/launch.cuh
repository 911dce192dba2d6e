// Small launch helpers shared by the CUDA kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/cuda_runtime.h"

namespace engine::kernels {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline cudaStream_t current_stream() { return static_cast<cudaStream_t>(cuda_current_stream()); }

// Blocks for a 1-D grid-stride loop over n elements: enough to fill the GPU, capped so the
// grid stays a sane size for huge n.
inline unsigned grid_for(int64_t n, int threads) {
  int64_t blocks = ceil_div(n, threads);
  if (blocks < 1) blocks = 1;
  if (blocks > 65535 * 8) blocks = 65535 * 8;
  return static_cast<unsigned>(blocks);
}

}  // namespace engine::kernels
