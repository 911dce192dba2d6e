// The race checker's edges, as ThreadSanitizer annotations (what and why: racecheck.h). This file
// is not itself instrumented: the emulator's bookkeeping is not kernel code.
#include "tests/support/cuda_emulator/racecheck.h"

#if EMU_RACECHECK
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <memory>
#include <vector>

// In ThreadSanitizer's runtime, not in its header: stop and resume recording this thread's
// memory accesses (memory it allocates meanwhile starts with no history).
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();

namespace emu::racecheck {
namespace {

// Release/acquire targets: only their addresses matter.
char launch_token;       // the host releases at a launch, the grid's threads acquire at start
char end_of_grid_token;  // every thread releases when it ends, the host acquires after the grid

void* host_fiber = nullptr;
std::vector<void*> fibers;  // [thread * kPools + pool], created on first use
std::size_t pool = 0;       // of the current block
uint64_t blocks_begun = 0;

// Per block: two barrier objects for the block and two per warp, used by phase parity. One object
// would be wrong: a thread released into it after passing barrier k and reaching barrier k + 1
// would then be "before" a slower thread's acquire for barrier k. Freed with the block, so no
// ordering leaks into the next block through a reused address.
std::unique_ptr<char[]> barrier_tokens;
std::vector<unsigned> block_phase, warp_phase;  // barriers passed, per thread of the block

void* fiber_of(std::size_t thread) {
  const std::size_t slot = thread * kPools + pool;
  if (fibers.size() <= slot) fibers.resize(slot + 1, nullptr);
  if (fibers[slot] == nullptr) fibers[slot] = __tsan_create_fiber(0);
  return fibers[slot];
}

char* block_token(std::size_t thread) { return &barrier_tokens[block_phase[thread] % 2]; }
char* warp_token(std::size_t thread) {
  return &barrier_tokens[2 + 2 * (thread / warpSize) + warp_phase[thread] % 2];
}

}  // namespace

void launch_begin() {
  host_fiber = __tsan_get_current_fiber();
  __tsan_release(&launch_token);
}

// The host takes no edge from the grid's threads until launch_end, so releasing again mid-grid
// orders no block after another. Only when needed: a thread's acquire is cheap when the token has
// not changed since its last one, and costs a pass over the vector clock when it has.
void release_host() { __tsan_release(&launch_token); }

void launch_end() { __tsan_acquire(&end_of_grid_token); }

void block_begin(const char* kernel_name, const dim3& block_index, const dim3& block_dim,
                 std::size_t threads) {
  pool = blocks_begun++ % kPools;
  const std::size_t warps = (threads + warpSize - 1) / warpSize;
  barrier_tokens.reset(new char[2 + 2 * warps]);
  block_phase.assign(threads, 0);
  warp_phase.assign(threads, 0);
  char name[160];
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t x = t % block_dim.x, y = t / block_dim.x % block_dim.y,
                      z = t / (std::size_t(block_dim.x) * block_dim.y);
    std::snprintf(name, sizeof name, "%s block (%u, %u, %u) thread (%zu, %zu, %zu)", kernel_name,
                  block_index.x, block_index.y, block_index.z, x, y, z);
    __tsan_set_fiber_name(fiber_of(t), name);
  }
}

void block_end(bool abandoned) {
  barrier_tokens.reset();
  if (!abandoned) return;
  // Threads stopped mid-kernel (a trap, a deadlock) never reached thread_end. Retire them: end
  // them as if they had (so the host, at launch_end, is ordered after what they did, and memory
  // they touched can be reused), then start their pool over with fresh fibers rather than carry
  // the unfinished call stacks along.
  for (std::size_t t = 0; t < block_phase.size(); ++t) {
    void*& fiber = fibers[t * kPools + pool];
    __tsan_switch_to_fiber(fiber, __tsan_switch_to_fiber_no_sync);
    thread_end();
    __tsan_switch_to_fiber(host_fiber, __tsan_switch_to_fiber_no_sync);
    __tsan_destroy_fiber(fiber);
    fiber = nullptr;
  }
}

std::size_t stack_slot(std::size_t thread) { return thread * kPools + pool; }

void switch_to_thread(std::size_t thread) {
  __tsan_switch_to_fiber(fiber_of(thread), __tsan_switch_to_fiber_no_sync);
}

void switch_to_scheduler() { __tsan_switch_to_fiber(host_fiber, __tsan_switch_to_fiber_no_sync); }

void thread_begin() { __tsan_acquire(&launch_token); }
void thread_end() { __tsan_release(&end_of_grid_token); }

void arrive_at_block_barrier(std::size_t thread) { __tsan_release(block_token(thread)); }
void leave_block_barrier(std::size_t thread) {
  __tsan_acquire(block_token(thread));
  ++block_phase[thread];
}
void arrive_at_warp_barrier(std::size_t thread) { __tsan_release(warp_token(thread)); }
void leave_warp_barrier(std::size_t thread) {
  __tsan_acquire(warp_token(thread));
  ++warp_phase[thread];
}

void ignore_begin() { __tsan_ignore_thread_begin(); }
void ignore_end() { __tsan_ignore_thread_end(); }

}  // namespace emu::racecheck
#endif
