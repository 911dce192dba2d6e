// Host allocation and the CUDA caching allocator (see allocator.h for why caching).
//
// The cache is a map from rounded block size to a stack of free device pointers. allocate()
// reuses a free block of exactly the rounded size, else calls cudaMalloc; if that fails it
// empties the cache and tries once more before reporting out-of-memory with the size asked for.
// Blocks are never split, which keeps the allocator easy to read; rounding bounds the waste.
#include "engine/allocator.h"

#include <malloc.h>

#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/host_memory.h"
#include "kernels/common/check.h"
#include "kernels/common/cuda_runtime.h"

namespace engine {

namespace {

constexpr std::size_t kHostAlignment = 64;
constexpr std::size_t kSmallRound = 512;
constexpr std::size_t kLargeRound = 2u << 20;  // 2 MiB
constexpr std::size_t kLargeThreshold = 1u << 20;

std::size_t round_up(std::size_t bytes, std::size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

std::size_t cuda_block_size(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  return bytes < kLargeThreshold ? round_up(bytes, kSmallRound) : round_up(bytes, kLargeRound);
}

using FreeBlocks = std::map<std::size_t, std::vector<void*>>;  // rounded size -> free blocks

// A CUDA graph's private pool (allocator.h).
struct GraphPool {
  FreeBlocks free_blocks;
  int64_t blocks_in_use = 0;  // handed out and not yet freed
  bool released = false;      // its graph is gone
};

struct State {
  std::mutex mutex;
  AllocatorStats host;
  AllocatorStats cuda;
  FreeBlocks cuda_free_blocks;
  int64_t next_pool = 1;
  std::map<int64_t, GraphPool> pools;
  std::map<void*, int64_t> pool_of_block;  // every block a pool owns (free or in use) -> pool
};

// The pool this thread captures into (0: none).
thread_local int64_t capturing_pool = 0;

// Host memory stays with the process. By default glibc serves blocks above a (self-adjusting,
// at most 32 MiB) threshold with mmap and returns them to the kernel on free, and trims the top
// of the heap once 2x that threshold is free there; a training or attack step frees and asks
// again for the same activation-sized blocks every step, so each step paid for fresh pages:
// page faults and the kernel zeroing them took about 10 % of a CPU PGD step (and 7 of 28 s in
// docs/build.md's "CPU speed" run). Serving blocks up to 32 MiB from the heap and never trimming
// it keeps the pages mapped for reuse; the cost is that the process keeps its peak heap size.
void keep_host_memory_mapped() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's upper limit for this setting on 64-bit
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  mallopt(M_TOP_PAD, 64 << 20);  // grow the heap in steps of at least 64 MiB
}

State& state() {
  static State* s = [] {
    keep_host_memory_mapped();
    return new State();  // never destroyed: tensors may outlive static destruction
  }();
  return *s;
}

void note_alloc(AllocatorStats& stats, std::size_t bytes) {
  stats.allocations += 1;
  stats.bytes_requested += static_cast<int64_t>(bytes);
  stats.bytes_in_use += static_cast<int64_t>(bytes);
  if (stats.bytes_in_use > stats.peak_bytes_in_use) stats.peak_bytes_in_use = stats.bytes_in_use;
}

// A host block this large is checked against what the process may still take (host_memory.h):
// Linux hands out more than it has and kills the process later, without a word, when the pages
// are touched. Smaller blocks are not worth the reads of /proc and /sys.
constexpr std::size_t kHostCheckThreshold = 16u << 20;

void refuse_what_cannot_fit(std::size_t bytes, const AllocatorStats& host) {
  const std::optional<HostMemoryBudget> budget =
      host_memory_budget(static_cast<uint64_t>(host.bytes_in_use));
  if (!budget || bytes <= budget->bytes) return;
  fail("host out of memory: a tensor of ", format_bytes(bytes), " (", bytes,
       " bytes) does not fit in the ", format_bytes(budget->bytes), " this process may still use (",
       budget->limit, "; tensors in use: ", format_bytes(static_cast<uint64_t>(host.bytes_in_use)),
       ")");
}

void release_cuda_cache_locked(State& s) {
  for (auto& [size, blocks] : s.cuda_free_blocks) {
    for (void* ptr : blocks) kernels::cuda_free(ptr);
    s.cuda.bytes_cached -= static_cast<int64_t>(size * blocks.size());
  }
  s.cuda_free_blocks.clear();
}

// A block of `block` bytes for the pool `id`: one it freed, else one from the cache (now the
// pool's); never cudaMalloc, which a capture refuses.
void* take_for_pool(State& s, int64_t id, std::size_t block, std::size_t bytes) {
  GraphPool& pool = s.pools.at(id);
  void* ptr = nullptr;
  for (FreeBlocks* source : {&pool.free_blocks, &s.cuda_free_blocks}) {
    auto it = source->find(block);
    if (it == source->end() || it->second.empty()) continue;
    ptr = it->second.back();
    it->second.pop_back();
    break;
  }
  ENGINE_CHECK(ptr != nullptr, "CUDA graph capture: a tensor of ", bytes, " bytes (block of ",
               block,
               ") was asked for and the allocator's cache holds no free block of that size; a "
               "capture cannot call cudaMalloc, so run the captured step once, eagerly, before "
               "capturing it");
  s.cuda.bytes_cached -= static_cast<int64_t>(block);
  s.pool_of_block[ptr] = id;
  pool.blocks_in_use += 1;
  return ptr;
}

}  // namespace

void* allocate(std::size_t bytes, Device device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (device.is_cpu()) {
    std::size_t rounded = round_up(bytes == 0 ? 1 : bytes, kHostAlignment);
    if (rounded >= kHostCheckThreshold) refuse_what_cannot_fit(rounded, s.host);
    void* ptr = std::aligned_alloc(kHostAlignment, rounded);
    ENGINE_CHECK(ptr != nullptr, "host out of memory: asked for ", bytes, " bytes (",
                 bytes / (1024.0 * 1024.0), " MiB)");
    note_alloc(s.host, rounded);
    return ptr;
  }
  std::size_t block = cuda_block_size(bytes);
  if (capturing_pool != 0) {
    void* ptr = take_for_pool(s, capturing_pool, block, bytes);
    note_alloc(s.cuda, block);
    return ptr;
  }
  auto it = s.cuda_free_blocks.find(block);
  void* ptr = nullptr;
  if (it != s.cuda_free_blocks.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    s.cuda.bytes_cached -= static_cast<int64_t>(block);
  } else {
    try {
      ptr = kernels::cuda_malloc(block);
    } catch (const Error&) {
      // Free the cached blocks and what the kernels' freed workspaces hold, and retry once.
      release_cuda_cache_locked(s);
      kernels::cuda_trim_workspace_pool();
      ptr = kernels::cuda_malloc(block);
    }
  }
  note_alloc(s.cuda, block);
  return ptr;
}

void deallocate(void* ptr, std::size_t bytes, Device device) {
  if (ptr == nullptr) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (device.is_cpu()) {
    std::free(ptr);
    s.host.bytes_in_use -= static_cast<int64_t>(round_up(bytes == 0 ? 1 : bytes, kHostAlignment));
    return;
  }
  std::size_t block = cuda_block_size(bytes);
  s.cuda.bytes_in_use -= static_cast<int64_t>(block);
  s.cuda.bytes_cached += static_cast<int64_t>(block);
  auto owner = s.pool_of_block.find(ptr);
  if (owner == s.pool_of_block.end() && capturing_pool != 0) {
    // Freed during a capture: the graph may read it at every replay, so its pool keeps it.
    owner = s.pool_of_block.emplace(ptr, capturing_pool).first;
    s.pools.at(capturing_pool).blocks_in_use += 1;
  }
  if (owner == s.pool_of_block.end()) {
    s.cuda_free_blocks[block].push_back(ptr);
    return;
  }
  const int64_t id = owner->second;
  GraphPool& pool = s.pools.at(id);
  pool.blocks_in_use -= 1;
  if (!pool.released) {
    pool.free_blocks[block].push_back(ptr);
    return;
  }
  s.pool_of_block.erase(owner);
  s.cuda_free_blocks[block].push_back(ptr);
  if (pool.blocks_in_use == 0) s.pools.erase(id);
}

AllocatorStats allocator_stats(Device device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return device.is_cpu() ? s.host : s.cuda;
}

void reset_peak_bytes(Device device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  AllocatorStats& stats = device.is_cpu() ? s.host : s.cuda;
  stats.peak_bytes_in_use = stats.bytes_in_use;
}

int64_t begin_graph_pool_capture() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ENGINE_CHECK(capturing_pool == 0, "begin_graph_pool_capture: this thread already captures");
  const int64_t id = s.next_pool++;
  s.pools.emplace(id, GraphPool());
  capturing_pool = id;
  return id;
}

void end_graph_pool_capture() { capturing_pool = 0; }

void release_graph_pool(int64_t id) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto found = s.pools.find(id);
  if (found == s.pools.end()) return;
  GraphPool& pool = found->second;
  for (auto& [size, blocks] : pool.free_blocks) {
    for (void* ptr : blocks) {
      s.pool_of_block.erase(ptr);
      s.cuda_free_blocks[size].push_back(ptr);
    }
  }
  pool.free_blocks.clear();
  pool.released = true;
  if (pool.blocks_in_use == 0) s.pools.erase(found);
}

void empty_cuda_cache() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  release_cuda_cache_locked(s);
  if (cuda_device_count() > 0) kernels::cuda_trim_workspace_pool();
}

}  // namespace engine
