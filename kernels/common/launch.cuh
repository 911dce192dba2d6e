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

// Blocks for a grid-stride loop over `items` with one block per item (a row, a line): the same
// cap as grid_for.
inline unsigned grid_for_items(int64_t items) { return grid_for(items, 1); }

// A 1-D grid-stride loop over n elements, in 64 bits (so n may pass 2^31):
//   for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) ...
// Consecutive threads take consecutive i, so a warp's accesses are coalesced.
__device__ inline int64_t grid_thread_index() {
  return blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
}
__device__ inline int64_t grid_thread_count() { return int64_t(gridDim.x) * blockDim.x; }

}  // namespace engine::kernels
