// The counters of device_counters.h; the profiler's CUDA half is kernel_profile.cu.
#include "kernels/common/device_counters.h"

#include <atomic>

namespace engine::kernels {

namespace {
std::atomic<int64_t> kernel_launches{0};
std::atomic<int64_t> library_calls{0};
std::atomic<int64_t> device_allocations{0};
std::atomic<int64_t> workspace_allocations{0};
std::atomic<bool> profiler_on{false};
thread_local KernelWork next_launch_work;
}  // namespace

namespace detail {
void set_profiling(bool on) { profiler_on.store(on, std::memory_order_relaxed); }

KernelWork take_next_launch_work() {
  const KernelWork work = next_launch_work;
  next_launch_work = KernelWork{};
  return work;
}
}  // namespace detail

DeviceCounters device_counters() {
  DeviceCounters c;
  c.kernel_launches = kernel_launches.load(std::memory_order_relaxed);
  c.library_calls = library_calls.load(std::memory_order_relaxed);
  c.device_allocations = device_allocations.load(std::memory_order_relaxed);
  c.workspace_allocations = workspace_allocations.load(std::memory_order_relaxed);
  return c;
}

DeviceCounters counters_between(const DeviceCounters& a, const DeviceCounters& b) {
  DeviceCounters d;
  d.kernel_launches = b.kernel_launches - a.kernel_launches;
  d.library_calls = b.library_calls - a.library_calls;
  d.device_allocations = b.device_allocations - a.device_allocations;
  d.workspace_allocations = b.workspace_allocations - a.workspace_allocations;
  return d;
}

void count_device_allocation() { device_allocations.fetch_add(1, std::memory_order_relaxed); }

void count_workspace_allocation() { workspace_allocations.fetch_add(1, std::memory_order_relaxed); }

bool count_kernel_launch() {
  kernel_launches.fetch_add(1, std::memory_order_relaxed);
  return profiler_on.load(std::memory_order_relaxed);
}

void count_library_call(const char* name) {
  library_calls.fetch_add(1, std::memory_order_relaxed);
  if (profiler_on.load(std::memory_order_relaxed)) profile_launch(name, true);
}

bool profiling() { return profiler_on.load(std::memory_order_relaxed); }

void describe_next_launch(const KernelWork& work) {
  if (profiler_on.load(std::memory_order_relaxed)) next_launch_work = work;
}

}  // namespace engine::kernels
