// The CUDA emulator's grid scheduler: runs a kernel's threads as cooperative fibers, and the
// device built-ins they call (contract and limits: include/cuda_runtime.h; memory and the rest of
// the runtime API are in runtime.cpp).
//
// Scheduler: blocks run one at a time, in order (or in reverse with DML_CUDA_EMULATOR_ORDER=
// reverse, which also reverses the threads, so an order-dependent race shows up as a different
// result). Within a block every thread is a fiber on its own stack. A round resumes every
// ready thread until it finishes or waits at a barrier; then the block barrier opens if every live
// thread waits there, or a warp barrier opens if every live lane of its mask waits there (lanes
// waiting with different masks are released together; the kernels here use full masks), or a
// warpgroup barrier (wgmma's, include/wgmma_ptx.h) if every live thread of its 128 waits there. A
// round that opens nothing is a deadlock (e.g. __syncthreads in divergent code) and fails the
// launch. A block's shared memory (its variables, their shared-window addresses and the view
// wgmma reads) is shared_memory.cpp's.
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <wgmma_ptx.h>

#include "tests/support/cuda_emulator/fiber_context.h"
#include "tests/support/cuda_emulator/launch_resources.h"
#include "tests/support/cuda_emulator/racecheck.h"
#include "tests/support/cuda_emulator/state.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_WITH_ASAN 1
#else
#define EMU_WITH_ASAN 0
#endif

namespace {

using emu::detail::api_mutex;
using emu::detail::kMaxThreadsPerBlock;
using emu::detail::record;
using emu::detail::sticky_error;

constexpr std::size_t kStackBytes = std::size_t(256) << 10;  // ASan frames are large
constexpr uint64_t kPoison = ~uint64_t(0);
constexpr std::size_t kWarpgroupThreads =
    128;  // 4 consecutive warps, the first one's index % 4 = 0

// ---- the grid scheduler ------------------------------------------------------------------------
enum class ThreadState { kReady, kAtBlockBarrier, kAtWarpBarrier, kAtWarpgroupBarrier, kDone };

struct Fiber {
  emu::detail::FiberContext context;
  dim3 index;
  ThreadState state = ThreadState::kReady;
  unsigned warp_mask = 0;  // the mask it waits with at a warp barrier
  uint64_t slot = 0;       // what it posts in a warp exchange
  void* fake_stack = nullptr;
  // cp.async: the copies issued and not yet completed, each with its group (the commits before it).
  std::vector<std::pair<int, emu::AsyncCopy>> async_copies;
  int async_commits = 0;
  // wgmma.mma_async: issued and not yet waited for, each with its group; commits; wgmma.fence
  // executed since the last wgmma.wait_group.
  std::vector<emu::WarpgroupMma> warpgroup_mmas;
  int warpgroup_mma_commits = 0;
  bool warpgroup_mma_fenced = false;
  emu::WarpgroupOperands warpgroup_posted{};  // what it gives a wgmma.mma_async's collective
};

struct Grid {
  const char* kernel_name = "";
  const std::function<void()>* body = nullptr;
  dim3 grid, block, block_index;
  std::vector<Fiber> threads;
  Fiber* current = nullptr;
  emu::detail::FiberContext scheduler;
  bool abandoned = false;                // a trap: the rest of the grid does not run
  std::size_t dynamic_shared_bytes = 0;  // the launch's (each block's is shared_memory.cpp's)
  const void* scheduler_stack_bottom = nullptr;
  std::size_t scheduler_stack_size = 0;
  void* scheduler_fake_stack = nullptr;
};
Grid grid_state;

std::vector<char*> stacks;

char* stack_for(std::size_t t) {
  while (stacks.size() <= t) {
    void* stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stack == MAP_FAILED) {
      std::fprintf(stderr, "CUDA emulator: cannot map a %zu-byte fiber stack\n", kStackBytes);
      std::abort();
    }
    stacks.push_back(static_cast<char*>(stack));
  }
  return stacks[t];
}

// Switches from a fiber back to the scheduler; returns when the scheduler resumes the fiber.
void yield_to_scheduler(bool exiting) {
  Grid& g = grid_state;
  Fiber* self = g.current;
#if EMU_WITH_ASAN
  __sanitizer_start_switch_fiber(exiting ? nullptr : &self->fake_stack, g.scheduler_stack_bottom,
                                 g.scheduler_stack_size);
#endif
  (void)exiting;
  emu::racecheck::switch_to_scheduler();
  emu::detail::switch_fiber_context(self->context, g.scheduler);
#if EMU_WITH_ASAN
  __sanitizer_finish_switch_fiber(self->fake_stack, nullptr, nullptr);
#endif
}

void fiber_entry() {
  Grid& g = grid_state;
#if EMU_WITH_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &g.scheduler_stack_bottom, &g.scheduler_stack_size);
#endif
  emu::racecheck::thread_begin();
  (*g.body)();
  emu::racecheck::thread_end();
  g.current->state = ThreadState::kDone;
  yield_to_scheduler(true);
  std::abort();  // a finished fiber is never resumed
}

// DML_CUDA_EMULATOR_TRACE=FILE appends one line per launch: kernel name, grid and block. Which
// kernels an op or a test launches, e.g. to find kernels no test reaches.
void trace_launch(const char* kernel_name, const dim3& grid, const dim3& block) {
  static const char* path = std::getenv("DML_CUDA_EMULATOR_TRACE");
  if (path == nullptr || *path == '\0') return;
  if (FILE* trace = std::fopen(path, "a")) {
    std::fprintf(trace, "%s grid (%u, %u, %u) block (%u, %u, %u)\n", kernel_name, grid.x, grid.y,
                 grid.z, block.x, block.y, block.z);
    std::fclose(trace);
  }
}

bool reverse_order() {
  const char* order = std::getenv("DML_CUDA_EMULATOR_ORDER");
  return order != nullptr && std::string(order) == "reverse";
}

std::string describe(const dim3& d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

}  // namespace

void emu::detail::fail_running_block(cudaError_t error, const std::string& why) {
  Grid& g = grid_state;
  std::fprintf(stderr, "CUDA emulator: kernel %s, block %s: %s\n", g.kernel_name,
               describe(g.block_index).c_str(), why.c_str());
  sticky_error = error;
  record(error);
  g.abandoned = true;
}

namespace {

using emu::detail::fail_running_block;

// Opens the barriers whose participants have all arrived; false when none could open.
bool open_barriers() {
  Grid& g = grid_state;
  bool any_live = false, all_at_block_barrier = true;
  for (const Fiber& f : g.threads) {
    if (f.state == ThreadState::kDone) continue;
    any_live = true;
    all_at_block_barrier = all_at_block_barrier && f.state == ThreadState::kAtBlockBarrier;
  }
  if (!any_live) return true;
  if (all_at_block_barrier) {
    for (Fiber& f : g.threads) {
      if (f.state == ThreadState::kAtBlockBarrier) f.state = ThreadState::kReady;
    }
    return true;
  }
  bool opened = false;
  const std::size_t count = g.threads.size();
  for (std::size_t warp_begin = 0; warp_begin < count; warp_begin += warpSize) {
    const std::size_t warp_end = std::min(count, warp_begin + warpSize);
    unsigned waiting = 0, live = 0, mask = 0;
    for (std::size_t t = warp_begin; t < warp_end; ++t) {
      const unsigned bit = 1u << (t - warp_begin);
      const Fiber& f = g.threads[t];
      if (f.state != ThreadState::kDone) live |= bit;
      if (f.state == ThreadState::kAtWarpBarrier) {
        waiting |= bit;
        mask |= f.warp_mask;
      }
    }
    if (waiting == 0 || (mask & live) != waiting) continue;
    for (std::size_t t = warp_begin; t < warp_end; ++t) {
      if (g.threads[t].state == ThreadState::kAtWarpBarrier)
        g.threads[t].state = ThreadState::kReady;
    }
    opened = true;
  }
  for (std::size_t group_begin = 0; group_begin < count; group_begin += kWarpgroupThreads) {
    const std::size_t group_end = std::min(count, group_begin + kWarpgroupThreads);
    std::size_t waiting = 0, live = 0;
    for (std::size_t t = group_begin; t < group_end; ++t) {
      live += g.threads[t].state != ThreadState::kDone;
      waiting += g.threads[t].state == ThreadState::kAtWarpgroupBarrier;
    }
    if (waiting == 0 || waiting != live) continue;
    for (std::size_t t = group_begin; t < group_end; ++t) {
      if (g.threads[t].state == ThreadState::kAtWarpgroupBarrier) {
        g.threads[t].state = ThreadState::kReady;
      }
    }
    opened = true;
  }
  return opened;
}

std::string waiting_summary() {
  int at_block = 0, at_warp = 0, at_warpgroup = 0, done = 0;
  for (const Fiber& f : grid_state.threads) {
    at_block += f.state == ThreadState::kAtBlockBarrier;
    at_warp += f.state == ThreadState::kAtWarpBarrier;
    at_warpgroup += f.state == ThreadState::kAtWarpgroupBarrier;
    done += f.state == ThreadState::kDone;
  }
  return std::to_string(at_block) + " threads wait at __syncthreads, " + std::to_string(at_warp) +
         " at a warp barrier, " + std::to_string(at_warpgroup) + " at a warpgroup barrier, " +
         std::to_string(done) + " have exited";
}

void run_block(bool reverse) {
  Grid& g = grid_state;
  const std::size_t count = std::size_t(g.block.x) * g.block.y * g.block.z;
  const Fiber* fibers_before = g.threads.data();
  const std::size_t stacks_before = stacks.size();
  g.threads.assign(count, Fiber());
  emu::detail::begin_block_shared_memory(g.dynamic_shared_bytes);
  emu::racecheck::block_begin(g.kernel_name, g.block_index, g.block, count);  // before stack_slot
  for (std::size_t t = 0; t < count; ++t) {
    Fiber& f = g.threads[t];
    f.index =
        dim3(static_cast<unsigned>(t % g.block.x), static_cast<unsigned>(t / g.block.x % g.block.y),
             static_cast<unsigned>(t / (std::size_t(g.block.x) * g.block.y)));
    emu::detail::start_fiber_context(f.context, stack_for(emu::racecheck::stack_slot(t)),
                                     kStackBytes, fiber_entry);
  }
  // New memory the block's threads will touch (ThreadSanitizer counts an allocation as a write).
  if (g.threads.data() != fibers_before || stacks.size() != stacks_before) {
    emu::racecheck::release_host();
  }
  for (;;) {
    for (std::size_t i = 0; i < count && !g.abandoned; ++i) {
      const std::size_t t = reverse ? count - 1 - i : i;
      Fiber& f = g.threads[t];
      if (f.state != ThreadState::kReady) continue;
      g.current = &f;
#if EMU_WITH_ASAN
      __sanitizer_start_switch_fiber(&g.scheduler_fake_stack, stacks[emu::racecheck::stack_slot(t)],
                                     kStackBytes);
#endif
      emu::racecheck::switch_to_thread(t);
      emu::detail::switch_fiber_context(g.scheduler, f.context);
#if EMU_WITH_ASAN
      __sanitizer_finish_switch_fiber(g.scheduler_fake_stack, nullptr, nullptr);
#endif
    }
    if (g.abandoned) break;
    if (std::all_of(g.threads.begin(), g.threads.end(),
                    [](const Fiber& f) { return f.state == ThreadState::kDone; })) {
      break;
    }
    if (!open_barriers()) {
      fail_running_block(cudaErrorLaunchFailure, "barrier deadlock: " + waiting_summary());
      break;
    }
  }
#if EMU_WITH_ASAN
  // Fibers abandoned mid-kernel leave poisoned frames on stacks the next block reuses.
  if (g.abandoned) {
    for (std::size_t t = 0; t < count; ++t) {
      ASAN_UNPOISON_MEMORY_REGION(stacks[emu::racecheck::stack_slot(t)], kStackBytes);
    }
  }
#endif
  emu::detail::end_block_shared_memory();
  emu::racecheck::block_end(g.abandoned);
}

Fiber& self() {
  if (grid_state.current == nullptr) {
    std::fprintf(stderr, "CUDA emulator: a device built-in was called outside a kernel\n");
    std::abort();
  }
  return *grid_state.current;
}

std::size_t self_linear() {
  return static_cast<std::size_t>(grid_state.current - grid_state.threads.data());
}

// Memory ordering: __syncwarp orders the lanes' memory accesses (CUDA Programming Guide,
// "Warp Synchronous Programming"); shuffles and votes exchange registers and order nothing, so
// only __syncwarp passes `orders_memory` (what the race checker models).
void wait_at_warp_barrier(unsigned mask, bool orders_memory) {
  Fiber& f = self();
  const unsigned lane_bit = 1u << (self_linear() % warpSize);
  if ((mask & lane_bit) == 0) {
    fail_running_block(cudaErrorLaunchFailure,
                       "a lane called a warp operation with a mask that excludes it");
    yield_to_scheduler(false);
  }
  f.warp_mask = mask;
  f.state = ThreadState::kAtWarpBarrier;
  if (orders_memory) emu::racecheck::arrive_at_warp_barrier(self_linear());
  yield_to_scheduler(false);
  if (orders_memory) emu::racecheck::leave_warp_barrier(self_linear());
}

}  // namespace

// ---- what a kernel sees ------------------------------------------------------------------------

namespace emu {

const dim3& thread_idx() { return self().index; }
const dim3& block_idx() { return grid_state.block_index; }
const dim3& block_dim() { return grid_state.block; }
const dim3& grid_dim() { return grid_state.grid; }
int lane_id() { return static_cast<int>(self_linear() % warpSize); }

void syncthreads() {
  self().state = ThreadState::kAtBlockBarrier;
  racecheck::arrive_at_block_barrier(self_linear());
  yield_to_scheduler(false);
  racecheck::leave_block_barrier(self_linear());
}

void syncwarp(unsigned mask) { wait_at_warp_barrier(mask, true); }

void trap() {
  fail_running_block(cudaErrorLaunchFailure, "__trap() in thread " + describe(self().index) +
                                                 " (an unspecified launch failure)");
  yield_to_scheduler(false);
  std::abort();  // an abandoned grid is never resumed
}

uint64_t exchange(unsigned mask, uint64_t value, int source) {
  self().slot = value;
  wait_at_warp_barrier(mask, false);  // everyone in the mask has posted
  const std::size_t warp_begin = self_linear() / warpSize * warpSize;
  const std::size_t from = warp_begin + static_cast<std::size_t>(source);
  uint64_t got = kPoison;  // a lane outside the mask, the block or alive: undefined on a GPU
  if (source >= 0 && source < warpSize && (mask >> source & 1u) &&
      from < grid_state.threads.size() && grid_state.threads[from].state != ThreadState::kDone) {
    got = grid_state.threads[from].slot;
  }
  wait_at_warp_barrier(mask, false);  // everyone has read before anyone posts again
  return got;
}

unsigned ballot(unsigned mask, bool predicate) {
  self().slot = predicate ? 1 : 0;
  wait_at_warp_barrier(mask, false);
  const std::size_t warp_begin = self_linear() / warpSize * warpSize;
  unsigned bits = 0;
  for (int lane = 0; lane < warpSize; ++lane) {
    const std::size_t t = warp_begin + static_cast<std::size_t>(lane);
    if ((mask >> lane & 1u) && t < grid_state.threads.size() &&
        grid_state.threads[t].state != ThreadState::kDone && grid_state.threads[t].slot != 0) {
      bits |= 1u << lane;
    }
  }
  wait_at_warp_barrier(mask, false);
  return bits;
}

void warp_collective_begin(uint64_t value, uint64_t (&lanes)[warpSize]) {
  self().slot = value;
  wait_at_warp_barrier(~0u, true);  // everyone has posted
  const std::size_t warp_begin = self_linear() / warpSize * warpSize;
  for (int lane = 0; lane < warpSize; ++lane) {
    const std::size_t t = warp_begin + static_cast<std::size_t>(lane);
    const bool present =
        t < grid_state.threads.size() && grid_state.threads[t].state != ThreadState::kDone;
    lanes[lane] = present ? grid_state.threads[t].slot : kAbsentLane;
  }
}

void warp_collective_end() { wait_at_warp_barrier(~0u, true); }

// A warpgroup barrier opens when every live thread of the 128 has arrived (open_barriers). It
// orders no memory for the race checker: wgmma exchanges descriptors, and its reads of shared
// memory are the emulator's own (the async proxy's view, below).
void warpgroup_barrier() {
  self().state = ThreadState::kAtWarpgroupBarrier;
  yield_to_scheduler(false);
}

void warpgroup_mma_collective(const WarpgroupOperands& mine) {
  self().warpgroup_posted = mine;
  warpgroup_barrier();  // every live thread of the warpgroup has posted
  const std::size_t group_begin = self_linear() / kWarpgroupThreads * kWarpgroupThreads;
  for (std::size_t t = group_begin; t < group_begin + kWarpgroupThreads; ++t) {
    if (t >= grid_state.threads.size() || grid_state.threads[t].state == ThreadState::kDone) {
      fault("wgmma.mma_async: not every thread of the warpgroup ran it");
    }
    const WarpgroupOperands& other = grid_state.threads[t].warpgroup_posted;
    if (other.descriptor_a != mine.descriptor_a || other.descriptor_b != mine.descriptor_b ||
        other.n != mine.n || other.scale_d != mine.scale_d || other.input != mine.input) {
      fault("wgmma.mma_async: the threads of the warpgroup gave different operands");
    }
  }
  warpgroup_barrier();  // everyone has compared before anyone posts again
}

void warpgroup_mma_fence() { self().warpgroup_mma_fenced = true; }

bool warpgroup_mma_issue(const WarpgroupMma& mma) {
  Fiber& f = self();
  if (!f.warpgroup_mma_fenced) return false;
  f.warpgroup_mmas.push_back(mma);
  f.warpgroup_mmas.back().group = f.warpgroup_mma_commits;
  return true;
}

std::shared_ptr<std::vector<float>> warpgroup_mma_chain(const float* d) {
  for (const WarpgroupMma& pending : self().warpgroup_mmas) {
    if (pending.d == d) return pending.accumulators;
  }
  return nullptr;
}

void warpgroup_mma_commit() { ++self().warpgroup_mma_commits; }

bool warpgroup_mma_take_completed(int pending, WarpgroupMma* mma, bool* chain_goes_on) {
  Fiber& f = self();
  const int complete_below = f.warpgroup_mma_commits - std::max(pending, 0);
  if (f.warpgroup_mmas.empty() || f.warpgroup_mmas.front().group >= complete_below) {
    f.warpgroup_mma_fenced = false;
    return false;
  }
  *mma = f.warpgroup_mmas.front();
  f.warpgroup_mmas.erase(f.warpgroup_mmas.begin());
  *chain_goes_on = false;
  for (const WarpgroupMma& later : f.warpgroup_mmas) *chain_goes_on |= later.d == mma->d;
  return true;
}

void async_copy_issue(const AsyncCopy& copy) {
  Fiber& f = self();
  f.async_copies.emplace_back(f.async_commits, copy);
}

void async_copy_commit() { ++self().async_commits; }

bool async_copy_take_completed(int pending, AsyncCopy* copy) {
  Fiber& f = self();
  // Groups 0 .. async_commits - 1 are committed; all but the newest `pending` must be complete.
  const int complete_below = f.async_commits - std::max(pending, 0);
  if (f.async_copies.empty() || f.async_copies.front().first >= complete_below) return false;
  *copy = f.async_copies.front().second;
  f.async_copies.erase(f.async_copies.begin());
  return true;
}

void fault(const char* why) {
  fail_running_block(cudaErrorLaunchFailure,
                     std::string(why) + " (thread " + describe(self().index) + ")");
  yield_to_scheduler(false);
  std::abort();  // an abandoned grid is never resumed
}

void fail_launch(cudaError_t error, const char* kernel_name, const char* why) {
  std::fprintf(stderr, "CUDA emulator: kernel %s not launched: %s\n", kernel_name, why);
  record(error);
}

void run_grid(const char* kernel_name, const LaunchConfig& config,
              const std::function<void()>& body) {
  std::lock_guard<std::mutex> lock(api_mutex);
  if (sticky_error != cudaSuccess) {
    record(sticky_error);
    return;
  }
  const dim3 b = config.block, gr = config.grid;
  const uint64_t threads = uint64_t(b.x) * b.y * b.z;
  if (threads == 0 || threads > kMaxThreadsPerBlock || b.z > 64 || gr.x == 0 || gr.y == 0 ||
      gr.z == 0 || gr.x > 0x7fffffffu || gr.y > 65535 || gr.z > 65535 ||
      config.dynamic_shared_bytes > emu::detail::kMaxOptInSharedBytes) {
    std::string why = "invalid configuration: grid " + describe(gr) + ", block " + describe(b) +
                      ", " + std::to_string(config.dynamic_shared_bytes) + " bytes dynamic shared";
    fail_launch(cudaErrorInvalidConfiguration, kernel_name, why.c_str());
    return;
  }
  // Past 48 KiB of dynamic shared memory only with the kernel's opt-in, and at most that much.
  bool opted_in = false;
  const std::size_t allowed = emu::detail::dynamic_shared_limit(config.kernel, &opted_in);
  if (config.dynamic_shared_bytes > allowed) {
    const std::string why = std::to_string(config.dynamic_shared_bytes) +
                            " bytes of dynamic shared memory, more than the kernel's limit of " +
                            std::to_string(allowed) +
                            " (past 48 KiB a kernel needs cudaFuncSetAttribute(kernel, "
                            "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes))";
    fail_launch(cudaErrorInvalidValue, kernel_name, why.c_str());
    return;
  }
  const std::string resources =
      launch_resource_problem(kernel_name, int64_t(threads), config.dynamic_shared_bytes, opted_in);
  if (!resources.empty()) {
    fail_launch(cudaErrorLaunchOutOfResources, kernel_name, resources.c_str());
    return;
  }
  trace_launch(kernel_name, gr, b);
  Grid& g = grid_state;
  g.kernel_name = kernel_name;
  g.body = &body;
  g.grid = gr;
  g.block = b;
  g.dynamic_shared_bytes = config.dynamic_shared_bytes;
  g.abandoned = false;
  const bool reverse = reverse_order();
  const uint64_t blocks = uint64_t(gr.x) * gr.y * gr.z;
  racecheck::launch_begin();
  for (uint64_t i = 0; i < blocks && !g.abandoned; ++i) {
    const uint64_t n = reverse ? blocks - 1 - i : i;
    g.block_index = dim3(static_cast<unsigned>(n % gr.x), static_cast<unsigned>(n / gr.x % gr.y),
                         static_cast<unsigned>(n / (uint64_t(gr.x) * gr.y)));
    run_block(reverse);
  }
  racecheck::launch_end();
  g.current = nullptr;
  g.threads.clear();
}

}  // namespace emu
