// Instruments of the CUDA path (issue 32, deliverable 5; docs/performance.md): counters of kernel
// launches, library calls and device allocations, and a profiler that times every launch of a
// stretch of work (one training step in `dml bench --train`). Plain C++: the counters are
// updated by the launch check (CUDA_CHECK_LAUNCH, cuda_check.cuh), the cuBLAS call, cuda_malloc
// and StreamWorkspace; the profiler's events and holds are in kernel_profile.cu.
//
// Cheap when unused: a launch costs one relaxed atomic increment and one relaxed load of the
// "profiling" flag; nothing else runs until start_profile().
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace engine::kernels {

struct DeviceCounters {
  int64_t kernel_launches = 0;        // our kernels, counted at CUDA_CHECK_LAUNCH
  int64_t library_calls = 0;          // cuBLAS (cublasSgemm) and cuDNN calls: each may launch
                                      // kernels of its own, which are not in kernel_launches
  int64_t device_allocations = 0;     // cudaMalloc (cuda_malloc: the caching allocator's source)
  int64_t workspace_allocations = 0;  // cudaMallocAsync of StreamWorkspace (the driver's pool)
};

// The totals since the process started (all host threads).
DeviceCounters device_counters();
// b - a, field by field: what happened between two snapshots.
DeviceCounters counters_between(const DeviceCounters& a, const DeviceCounters& b);

void count_device_allocation();
void count_workspace_allocation();
// Counts one launch; returns whether the profiler is on (then the caller reports the launch).
bool count_kernel_launch();
// Counts one cuBLAS/cuDNN call `name` (and reports it to the profiler when it is on).
void count_library_call(const char* name);

// What a launcher knows of its next kernel: a name and its work by count (FLOPs: 2 per
// multiply-add; bytes: compulsory f32 traffic, each input read once and each output written
// once). A negative count is unknown (printed '-').
struct KernelWork {
  const char* name = nullptr;
  double flops = -1.0;
  double bytes = -1.0;
};

// Tells the profiler what the next launch on this host thread is. A no-op (one load) when the
// profiler is off; called by the launchers of the kernels an attack pass runs.
void describe_next_launch(const KernelWork& work);

// One launch (or library call) of a profiled stretch.
struct ProfiledLaunch {
  std::string name;   // KernelWork::name, else the launch check's first word
  std::string label;  // the launch check's whole text: launcher and shape
  double flops = -1.0, bytes = -1.0;
  double ms = 0.0;  // from the previous event on the stream to this launch's (see below)
  bool library = false;
  // The GPU had finished everything before this launch when it was issued, so its time may
  // include idle time waiting for the host (always on the CPU emulator, which runs each launch
  // as it is issued).
  bool after_idle = false;
};

// The profiler (kernel_profile.cu; CUDA builds only, the stub throws). Between start_profile()
// and stop_profile() every launch on the current stream is followed by an event, and each
// launch's time is the time between the event before it and its own: on a stream, that is the
// kernel's execution time as long as the kernel was already queued when the one before it ended.
// To keep the GPU behind the host, the profiler queues a hold (a one-thread kernel that spins
// for about 5 ms, not timed) at the start, every 128 launches and after each host wait (a copy
// to the host, cuda_synchronize), and the next launch's time starts after the hold. Each launch
// is therefore timed back to back with its predecessor, with no host gaps, and the sum of the
// times is the GPU time of the stretch. Memsets and copies on the stream are counted in the
// next launch's time.
void start_profile();
bool profiling();
// Stops recording; synchronizes the device and returns the launches in order.
std::vector<ProfiledLaunch> stop_profile();
// Called by CUDA_CHECK_LAUNCH (label = its text) and count_library_call while profiling.
void profile_launch(const std::string& label, bool library);
// Called after the host waited for the device (the GPU has gone idle): queues a hold.
void profile_after_host_wait();

// The launch check's text, built only while profiling.
template <typename... Parts>
std::string launch_label(const Parts&... parts) {
  std::ostringstream text;
  (text << ... << parts);
  return text.str();
}

namespace detail {
void set_profiling(bool on);  // start_profile and stop_profile
// describe_next_launch's value for this thread, taken (and cleared) by profile_launch.
KernelWork take_next_launch_work();
}  // namespace detail

}  // namespace engine::kernels
