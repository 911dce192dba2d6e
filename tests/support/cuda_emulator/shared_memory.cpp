// The CUDA emulator's shared memory: each block's __shared__ variables and dynamic shared memory,
// their addresses in the block's shared window, and the async proxy's view that wgmma reads
// (contract: include/cuda_runtime.h and include/wgmma_ptx.h; the scheduler, scheduler.cpp, calls
// begin_block_shared_memory and end_block_shared_memory around every block it runs).
//
// One block runs at a time (api_mutex is held for a whole grid), so one BlockShared is the
// running block's. Every variable is fresh memory filled with 0xFF (what a kernel that reads
// before it writes would see as NaN); the race checker ignores this bookkeeping, so the fill is no
// thread's write.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <wgmma_ptx.h>

#include "tests/support/cuda_emulator/racecheck.h"
#include "tests/support/cuda_emulator/state.h"

namespace {

using emu::detail::api_mutex;
using emu::detail::fail_running_block;
using emu::detail::kMaxStaticSharedBytes;
using emu::detail::record;

// One __shared__ variable of the running block: its memory, where it sits in the block's shared
// window (the addresses __cvta_generic_to_shared gives and wgmma's descriptors hold), and its
// async proxy's view (what wgmma reads: the memory as of the last fence.proxy.async; empty, i.e.
// 0xFF bytes, before the first).
struct SharedAllocation {
  const void* layout;
  unsigned char* memory;
  std::size_t bytes;
  uint32_t address;
  std::vector<unsigned char> async_view;
};

struct BlockShared {
  std::vector<SharedAllocation> allocations;
  std::size_t static_bytes = 0;   // of the __shared__ variables
  std::size_t dynamic_bytes = 0;  // the launch's
  uint32_t window_end = 0;        // the next free shared-window address
};
BlockShared block_shared;

// cudaFuncAttributeMaxDynamicSharedMemorySize per kernel function (0 or absent: 48 KiB).
std::map<const void*, std::size_t> max_dynamic_shared_bytes;

// The key of a block's dynamic shared memory among its shared allocations.
const char kDynamicSharedKey = 0;

// This block's shared allocation under `layout` (a key), made by the first thread to ask: fresh
// memory of `bytes` filled with 0xFF, placed in the shared window after the variables before it.
// `created` tells whether this call made it.
void* block_shared_allocation(const void* layout, std::size_t bytes, std::size_t alignment,
                              bool* created) {
  BlockShared& block = block_shared;
  *created = false;
  for (const SharedAllocation& known : block.allocations) {
    if (known.layout == layout) return known.memory;  // another thread of this block made it
  }
  // Emulator bookkeeping, not a kernel access: the race checker ignores it, so the new memory has
  // no history and the 0xFF fill is no thread's write.
  emu::racecheck::ignore_begin();
  alignment = std::max<std::size_t>(alignment, 16);
  const std::size_t rounded = std::max<std::size_t>(1, (bytes + alignment - 1) / alignment);
  void* memory = std::aligned_alloc(alignment, rounded * alignment);
  if (memory == nullptr) {
    std::fprintf(stderr, "CUDA emulator: cannot allocate %zu bytes of shared memory\n", bytes);
    std::abort();
  }
  std::memset(memory, 0xFF, bytes);
  // Its place in the shared window: after the variables before it, at its alignment.
  const uint32_t address =
      static_cast<uint32_t>((block.window_end + alignment - 1) / alignment * alignment);
  block.window_end = address + static_cast<uint32_t>(bytes);
  block.allocations.push_back(
      SharedAllocation{layout, static_cast<unsigned char*>(memory), bytes, address, {}});
  emu::racecheck::ignore_end();
  *created = true;
  return memory;
}

}  // namespace

namespace emu::detail {

void begin_block_shared_memory(std::size_t dynamic_bytes) {
  block_shared.allocations.clear();
  block_shared.static_bytes = 0;
  block_shared.dynamic_bytes = dynamic_bytes;
  block_shared.window_end = 0;
}

void end_block_shared_memory() {
  racecheck::ignore_begin();
  for (const SharedAllocation& allocation : block_shared.allocations) std::free(allocation.memory);
  block_shared.allocations.clear();
  racecheck::ignore_end();
}

std::size_t dynamic_shared_limit(const void* kernel, bool* opted_in) {
  const auto opt_in = max_dynamic_shared_bytes.find(kernel);
  *opted_in = opt_in != max_dynamic_shared_bytes.end();
  return std::max<std::size_t>(kMaxStaticSharedBytes, *opted_in ? opt_in->second : 0);
}

}  // namespace emu::detail

namespace emu {

void* shared_block_bytes(const void* layout, std::size_t bytes, std::size_t alignment) {
  bool created = false;
  void* memory = block_shared_allocation(layout, bytes, alignment, &created);
  if (!created) return memory;
  block_shared.static_bytes += bytes;
  if (block_shared.static_bytes > kMaxStaticSharedBytes) {
    fail_running_block(cudaErrorInvalidConfiguration,
                       std::to_string(block_shared.static_bytes) +
                           " bytes of static shared memory, more than " +
                           std::to_string(kMaxStaticSharedBytes));
  }
  return memory;
}

void* dynamic_shared_memory(std::size_t alignment) {
  bool created = false;
  return block_shared_allocation(&kDynamicSharedKey, block_shared.dynamic_bytes, alignment,
                                 &created);
}

cudaError_t set_max_dynamic_shared_bytes(const void* kernel, int bytes) {
  std::lock_guard<std::mutex> lock(api_mutex);
  if (kernel == nullptr) return record(cudaErrorInvalidValue);
  if (bytes < 0 || std::size_t(bytes) > emu::detail::kMaxOptInSharedBytes) {
    std::fprintf(stderr,
                 "CUDA emulator: cudaFuncSetAttribute: %d bytes of dynamic shared memory, more "
                 "than the %zu a block can have\n",
                 bytes, emu::detail::kMaxOptInSharedBytes);
    return record(cudaErrorInvalidValue);
  }
  max_dynamic_shared_bytes[kernel] = std::size_t(bytes);
  return cudaSuccess;
}

uint32_t shared_window_address(const void* pointer) {
  const unsigned char* byte = static_cast<const unsigned char*>(pointer);
  for (const SharedAllocation& shared : block_shared.allocations) {
    if (byte >= shared.memory && byte <= shared.memory + shared.bytes) {
      return shared.address + static_cast<uint32_t>(byte - shared.memory);
    }
  }
  fault("__cvta_generic_to_shared: the pointer is not in this block's shared memory");
}

void async_proxy_fence_shared() {
  racecheck::ignore_begin();
  for (SharedAllocation& shared : block_shared.allocations) {
    shared.async_view.assign(shared.memory, shared.memory + shared.bytes);
  }
  racecheck::ignore_end();
}

void read_async_proxy_shared(uint32_t address, void* to, std::size_t bytes) {
  for (const SharedAllocation& shared : block_shared.allocations) {
    if (address >= shared.address && address + bytes <= shared.address + shared.bytes) {
      racecheck::ignore_begin();
      const std::size_t offset = address - shared.address;
      if (shared.async_view.empty()) {  // no fence.proxy.async yet: fresh memory's 0xFF bytes
        std::memset(to, 0xFF, bytes);
      } else {
        std::memcpy(to, shared.async_view.data() + offset, bytes);
      }
      // Bytes that changed since the last fence, before this wgmma completed: on a GPU the tensor
      // core may read them either way (a store or cp.async into a stage that a multiply in flight
      // still reads), so the result is undefined; fail rather than pick one.
      const bool overwritten =
          !shared.async_view.empty() && std::memcmp(to, shared.memory + offset, bytes) != 0;
      racecheck::ignore_end();
      if (overwritten) {
        fault(
            "wgmma: shared memory it reads was written after the last fence.proxy.async and "
            "before the wgmma completed (a stage overwritten while a multiply still reads it)");
      }
      return;
    }
  }
  fault("wgmma: a matrix descriptor addresses bytes outside this block's shared variables");
}

}  // namespace emu
