// The profiler of device_counters.h: one event after every launch of a profiled stretch, and holds
// that keep the GPU behind the host so that each launch is timed back to back with the one
// before it (the contract is in device_counters.h). No CUPTI: only events on the current stream.
#include <cuda_runtime.h>

#include <memory>
#include <mutex>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/device_counters.h"
#include "kernels/common/launch.cuh"

namespace engine::kernels {

namespace {

// About 5 ms at the ~2 GHz of an H100 or H200 (10 ms on the CPU emulator, whose clock64 counts
// nanoseconds): far longer than the host takes to issue 128 launches.
constexpr long long kHoldCycles = 10000000;
constexpr int kLaunchesPerHold = 128;

__global__ void profile_hold_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

struct Profile {
  std::vector<ProfiledLaunch> launches;
  std::vector<cudaEvent_t> starts, ends;  // per launch: the events its time lies between
  std::vector<cudaEvent_t> events;        // every event made, destroyed at stop_profile
  cudaEvent_t last = nullptr;             // where the next launch's time starts
  int launches_since_hold = 0;
};

std::mutex profile_mutex;
std::unique_ptr<Profile> profile;

cudaEvent_t record_event(Profile& p) {
  cudaEvent_t event = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDefault), "profiler: cudaEventCreate");
  p.events.push_back(event);
  CUDA_CHECK(cudaEventRecord(event, current_stream()), "profiler: cudaEventRecord");
  return event;
}

// Not a counted launch: the holds are the profiler's, not the work's.
void queue_hold(Profile& p) {
  profile_hold_kernel<<<1, 1, 0, current_stream()>>>(kHoldCycles);
  CUDA_CHECK(cudaGetLastError(), "profiler: hold kernel");
  p.last = record_event(p);
  p.launches_since_hold = 0;
}

// "conv2d_fprop_cuda N=256 ..." -> "conv2d_fprop_cuda"; "matmul_cuda: sum" -> "matmul_cuda".
std::string first_word(const std::string& label) {
  const size_t end = label.find_first_of(" :,");
  return label.substr(0, end);
}

}  // namespace

void start_profile() {
  std::lock_guard<std::mutex> lock(profile_mutex);
  ENGINE_CHECK(profile == nullptr, "start_profile: the profiler is already on");
  profile = std::make_unique<Profile>();
  queue_hold(*profile);
  detail::set_profiling(true);
}

void profile_launch(const std::string& label, bool library) {
  std::lock_guard<std::mutex> lock(profile_mutex);
  if (profile == nullptr) return;
  Profile& p = *profile;
  const KernelWork work = detail::take_next_launch_work();
  ProfiledLaunch launch;
  launch.label = label;
  launch.name = work.name != nullptr ? work.name : first_word(label);
  launch.flops = work.flops;
  launch.bytes = work.bytes;
  launch.library = library;
  const cudaError_t done = cudaEventQuery(p.last);
  if (done != cudaSuccess) (void)cudaGetLastError();  // "not ready" is an answer, not an error
  launch.after_idle = done == cudaSuccess;
  p.starts.push_back(p.last);
  p.last = record_event(p);
  p.ends.push_back(p.last);
  p.launches.push_back(launch);
  if (++p.launches_since_hold >= kLaunchesPerHold) queue_hold(p);
}

void profile_after_host_wait() {
  std::lock_guard<std::mutex> lock(profile_mutex);
  if (profile != nullptr) queue_hold(*profile);
}

std::vector<ProfiledLaunch> stop_profile() {
  std::unique_ptr<Profile> p;
  {
    std::lock_guard<std::mutex> lock(profile_mutex);
    ENGINE_CHECK(profile != nullptr, "stop_profile: the profiler is not on");
    detail::set_profiling(false);
    p = std::move(profile);
  }
  CUDA_CHECK(cudaDeviceSynchronize(), "stop_profile: synchronize");
  for (size_t i = 0; i < p->launches.size(); ++i) {
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, p->starts[i], p->ends[i]), "stop_profile: event time");
    p->launches[i].ms = ms;
  }
  for (cudaEvent_t event : p->events) CUDA_CHECK(cudaEventDestroy(event), "stop_profile");
  return std::move(p->launches);
}

}  // namespace engine::kernels
