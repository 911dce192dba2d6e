// The CUDA emulator's race checker: a CPU stand-in for compute-sanitizer's racecheck, built on
// ThreadSanitizer. Off unless the build sets ENGINE_EMULATOR_RACECHECK (which compiles the
// translated kernels with -fsanitize=thread and defines EMU_RACECHECK=1 for the emulator);
// tools/cuda_emulator_racecheck.sh builds that and runs the [cuda] tests under it.
//
// Why: the emulator runs a block's threads one after another, so a kernel whose threads race
// usually computes the right answer here -- e.g. every block adding into out[0] without an atomic
// gives the exact sum when blocks run in turn. ThreadSanitizer instead checks that every pair of
// conflicting accesses (same bytes, different threads, at least one write, not both atomic) is
// ordered by a happens-before edge, whatever order the threads happened to run in.
//
// The model. Each emulated thread is a ThreadSanitizer fiber, and switching between fibers orders
// nothing. The edges are exactly the orders CUDA guarantees:
//   launch          everything the host did before a launch -> every thread of the grid;
//   end of grid     every thread -> the host after the launch (so -> every later launch);
//   __syncthreads   every thread of the block before it -> every thread after it;
//   warp barriers   (__syncwarp, shuffles, votes) the same within the warp;
//   atomics         atomicAdd/atomicMax are ThreadSanitizer atomics: they do not race with each
//                   other and order nothing else (CUDA atomics are relaxed).
// Each block gets fresh shared memory (cuda_translate, shared_block). Fibers (and their stacks)
// alternate between two pools, block n on pool n % 2, so consecutive blocks never share a fiber.
// Blocks an even distance apart do, and what one fiber does is ordered: a race only between such
// blocks is missed. (More pools would catch more, but ThreadSanitizer's vector clocks grow with
// the number of fibers, and with them the cost of every barrier.) Streams are not modelled (the
// emulator runs everything in order).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace emu::racecheck {

#if EMU_RACECHECK
constexpr std::size_t kPools = 2;

// Host side, around a grid: everything the host did before launch_begin happens before the
// grid's threads; everything they did, before what the host does after launch_end.
void launch_begin();
void launch_end();
// Host side, when it allocated memory for a block's threads (stacks, their records) after
// launch_begin: that, too, happens before them.
void release_host();
// Scheduler, around a block of `threads` threads: picks the pool, names the fibers after their
// kernel, block and thread (what a report shows), and makes fresh barrier objects.
void block_begin(const char* kernel_name, const dim3& block_index, const dim3& block_dim,
                 std::size_t threads);
void block_end(bool abandoned);
// The stack a thread of the current block runs on: one per (thread, pool).
std::size_t stack_slot(std::size_t thread);
// Call right before switching stacks.
void switch_to_thread(std::size_t thread);
void switch_to_scheduler();
// In the thread, first and last.
void thread_begin();
void thread_end();
// In the thread, around waiting at a barrier.
void arrive_at_block_barrier(std::size_t thread);
void leave_block_barrier(std::size_t thread);
void arrive_at_warp_barrier(std::size_t thread);
void leave_warp_barrier(std::size_t thread);
// Around the emulator's own work in a thread or between blocks (shared memory allocation, fill
// and release): ThreadSanitizer records none of its accesses.
void ignore_begin();
void ignore_end();
#else
inline void launch_begin() {}
inline void launch_end() {}
inline void release_host() {}
inline void block_begin(const char*, const dim3&, const dim3&, std::size_t) {}
inline void block_end(bool) {}
inline std::size_t stack_slot(std::size_t thread) { return thread; }
inline void switch_to_thread(std::size_t) {}
inline void switch_to_scheduler() {}
inline void thread_begin() {}
inline void thread_end() {}
inline void arrive_at_block_barrier(std::size_t) {}
inline void leave_block_barrier(std::size_t) {}
inline void arrive_at_warp_barrier(std::size_t) {}
inline void leave_warp_barrier(std::size_t) {}
inline void ignore_begin() {}
inline void ignore_end() {}
#endif

}  // namespace emu::racecheck
