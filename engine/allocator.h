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
  // cudaMalloc calls (cache misses; none while capturing) are counted once, by
  // kernels::device_counters().device_allocations (kernels/common/device_counters.h).
};

void* allocate(std::size_t bytes, Device device);
void deallocate(void* ptr, std::size_t bytes, Device device);

AllocatorStats allocator_stats(Device device);
void reset_peak_bytes(Device device);
// CUDA: returns every cached free block, and the kernels' freed workspaces, to the driver.
void empty_cuda_cache();

// ---- CUDA graphs (engine/cuda_graph.h)
// ----------------------------------------------------------- A graph replays the addresses it
// captured, so the blocks its step used must stay its own while it lives: a private pool (PyTorch's
// graph pools). Between begin_graph_pool_capture() and end_graph_pool_capture(), the calling
// thread's CUDA allocations come from the new pool, filled from the cache's free blocks, and never
// from cudaMalloc (which a capture refuses): a block size the cache does not hold is an
// engine::Error saying to run the step once, eagerly, first. Blocks the pool handed out go back to
// it when freed, at any time; a block from outside the pool freed by the capturing thread during
// the capture joins the pool too (the graph may read it). After release_graph_pool() (the graph is
// destroyed) the pool's blocks return to the cache, those still in use when they are freed.
int64_t begin_graph_pool_capture();  // the new pool's id
void end_graph_pool_capture();
void release_graph_pool(int64_t pool);

}  // namespace engine
