// Memory for tensors. CPU: 64-byte aligned host memory, kept mapped by glibc between steps (see
// keep_host_memory_mapped in allocator.cpp). CUDA: a caching allocator — freed blocks
// are kept in per-size free lists and reused, because cudaMalloc/cudaFree synchronize the device
// and cost far more than a training step's kernels. Sizes are rounded up to 512 bytes (small) or
// 2 MiB (large) so blocks of nearby sizes can be shared.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/device.h"

namespace engine {

struct AllocatorStats {
  int64_t allocations = 0;      // number of allocate() calls
  int64_t bytes_requested = 0;  // total bytes asked for over the process lifetime
  int64_t bytes_in_use = 0;     // currently handed out
  int64_t peak_bytes_in_use = 0;
  int64_t bytes_cached = 0;  // CUDA: held in free lists, not handed out
};

void* allocate(std::size_t bytes, Device device);
void deallocate(void* ptr, std::size_t bytes, Device device);

AllocatorStats allocator_stats(Device device);
void reset_peak_bytes(Device device);
// CUDA: returns every cached free block, and the kernels' freed workspaces, to the driver.
void empty_cuda_cache();

}  // namespace engine
