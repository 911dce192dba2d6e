// Split-K: how a GEMM-shaped CUDA kernel cuts its reduction when the output alone has too few
// tiles to fill the GPU (matmul_cuda's long p, conv2d wgrad's N P Q). Blocks along blockIdx.z
// each reduce one contiguous chunk into a partial output, and a second kernel adds the partials
// in chunk order (deterministic, no atomics).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/common/cuda_runtime.h"

namespace engine::kernels {

// `splits` contiguous chunks of `chunk` reduction indices; the last chunk may be shorter.
struct SplitK {
  int splits = 1;
  int64_t chunk = 0;
};

// The rule for a reduction of `kdim` indices walked in steps of `step`, over an output of `tiles`
// blocks, on the current device: aim at two blocks per SM, but give every chunk at least 64 steps
// (so the partial outputs' traffic stays small next to the chunk's own reads) and take at most 64
// chunks. Chunks are multiples of `step`; one chunk is the whole of kdim. `multiprocessors`: the
// GPU's SM count (the overload below asks the current device).
inline SplitK choose_split_k(int64_t kdim, int64_t tiles, int64_t step, int multiprocessors) {
  SplitK split;
  split.chunk = std::max<int64_t>(kdim, 1);
  const int64_t most = std::min<int64_t>(kdim / (64 * step), 64);
  if (tiles <= 0 || most < 2) return split;  // no room for two chunks of 64 steps
  const int64_t blocks_wanted = 2 * int64_t(multiprocessors);
  const int64_t splits = std::min((blocks_wanted + tiles - 1) / tiles, most);
  if (splits < 2) return split;  // the output's tiles already fill the GPU
  const int64_t per_split = (kdim + splits - 1) / splits;
  split.chunk = (per_split + step - 1) / step * step;
  split.splits = static_cast<int>((kdim + split.chunk - 1) / split.chunk);
  return split;
}

inline SplitK choose_split_k(int64_t kdim, int64_t tiles, int64_t step) {
  return choose_split_k(kdim, tiles, step, cuda_multiprocessor_count());
}

}  // namespace engine::kernels
