// The CUDA emulator's stand-in for <cuda_runtime.h>: the parts of the CUDA language and runtime
// API that kernels/*_cuda.cu use, implemented on the CPU
// (tests/support/cuda_emulator/scheduler.cpp, shared_memory.cpp and runtime.cpp).
//
// Why: the build and CI machines have nvcc but no GPU, so without this the CUDA kernels are
// compiled and never run. The build's `engine_emulated` library (CMakeLists.txt, docs/testing.md)
// rewrites each .cu file with cuda_translate (kernel<<<grid, block, smem, stream>>>(args) becomes
// emu::launch_named("kernel", kernel, emu::LaunchConfig(grid, block, smem, stream), args);
// `__shared__` becomes fresh 0xFF-filled memory at every block) and compiles it with the host
// compiler against this header. The [cuda] tests then run every kernel's own code against the CPU
// reference, as the CTest cases `<area>.emulated.*`.
//
// Execution model: one grid at a time on the calling host thread. Blocks run one after another;
// the threads of a block are cooperative fibers, so __syncthreads, __syncwarp and the warp
// shuffles/votes are real barriers (a thread runs until it reaches one; the barrier opens when
// every live thread of the block -- or of the warp's mask -- has arrived). What it checks that a
// GPU would also reject: launch configurations (0 blocks, > 1024 threads, static shared memory
// over 48 KiB, dynamic shared memory past 48 KiB without the kernel's opt-in or past the opt-in),
// blocks too large for the kernel's registers, shared memory or __launch_bounds__
// as ptxas compiled it (tests/support/cuda_emulator/launch_resources.h), kernel pointer arguments
// outside any device allocation, copies outside an allocation, barrier deadlocks, __trap. What it
// adds: device memory and shared memory start as 0xFF bytes (NaN floats, -1 integers), so reading
// what nobody wrote shows up in the results. What it cannot see: data races (a racing kernel
// usually computes the right answer here, since threads run in turn; the race checker build,
// tests/support/cuda_emulator/racecheck.h, finds them), timing, and anything about performance.
//
// Streams and graphs: streams are tags (everything runs in order as it is issued), but stream
// capture is real (tests/support/cuda_emulator/graph.cpp): while a stream captures, kernel
// launches, device-to-device copies, memsets and stream-ordered allocations on it are recorded (the
// kernel, its grid, block, dynamic shared memory and a copy of its arguments) instead of run, and
// cudaGraphLaunch replays them in order, checking the pointer arguments again (a graph that reads
// freed memory fails as a GPU's would). What CUDA refuses during a capture, the emulator refuses
// with the same error and invalidates the capture (cudaStreamEndCapture then answers
// cudaErrorStreamCaptureInvalidated): synchronizing the capturing stream; cudaMalloc, cudaFree, a
// synchronous cudaMemcpy or a device synchronization where the capture's mode forbids them (global:
// from any thread; thread-local: from the capturing thread); a copy between host and device memory
// on the capturing stream (all host memory here is pageable, which a graph cannot copy). Stricter
// than CUDA: work on the legacy stream from a thread whose capture is active is refused
// (cudaErrorStreamCaptureImplicit) even when the capturing stream is non-blocking, where CUDA would
// run it at once, outside the graph -- in a captured step that is a bug either way. Memory a
// capture allocates (cudaMallocAsync) belongs to the graph until the graph and its instances are
// destroyed, and reads as 0xFF bytes again at every replay. Not emulated: events in captures,
// capturing several streams into one graph, graphs launched into a capture, graph editing.
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- the CUDA language: qualifiers become nothing, kernels become ordinary functions -----------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
using uint3 = dim3;

// Vector types: as CUDA's, aligned to their size (a misaligned float4 access faults on a GPU).
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

constexpr int warpSize = 32;

// ---- the runtime API (host side) ---------------------------------------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureImplicit = 906,
  cudaErrorStreamCaptureWrongThread = 908,
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
};
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrL2CacheSize = 38,
};
enum cudaMemPoolAttr {
  cudaMemPoolAttrReleaseThreshold = 4,
};
constexpr unsigned cudaEventDefault = 0;
constexpr unsigned cudaStreamDefault = 0;  // a blocking stream: synchronizes with the legacy one
constexpr unsigned cudaStreamNonBlocking = 1;  // does not
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};

struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
using cudaGraph_t = CUgraph_st*;
using cudaGraphExec_t = CUgraphExec_st*;
struct CUmemPoolHandle_st;
using cudaMemPool_t = CUmemPoolHandle_st*;

struct cudaDeviceProp {
  char name[256];
  std::size_t totalGlobalMem;
  std::size_t sharedMemPerBlock;
  std::size_t sharedMemPerBlockOptin;  // with cudaFuncAttributeMaxDynamicSharedMemorySize
  int warpSize;
  int maxThreadsPerBlock;
  int multiProcessorCount;
  int major;
  int minor;
};

const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
// Only the dynamic-shared-memory opt-in is emulated (see cudaFuncSetAttribute below).
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device);
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes);
cudaError_t cudaMalloc(void** ptr, std::size_t bytes);
cudaError_t cudaMallocAsync(void** ptr, std::size_t bytes, cudaStream_t stream);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream);
// The stream-ordered allocator's pool: the emulator has one per device and no memory to give
// back, so the release threshold is checked and kept, nothing more.
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, void* value);
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, std::size_t min_bytes_to_keep);
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);  // always done: launches are synchronous here
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop);
// Streams and graphs (graph.cpp; what is captured and refused: the top of this file).
cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

namespace emu {

// ---- what a kernel sees ------------------------------------------------------------------------
const dim3& thread_idx();
const dim3& block_idx();
const dim3& block_dim();
const dim3& grid_dim();

void syncthreads();
void syncwarp(unsigned mask);
[[noreturn]] void trap();

// Warp exchange: every lane of `mask` posts 8 bytes, waits for the others, reads lane `source`'s.
uint64_t exchange(unsigned mask, uint64_t value, int source);
int lane_id();

template <typename T>
T shuffle_from(unsigned mask, T value, int source) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable<T>::value,
                "warp shuffles move at most 8 bytes of a plain type");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  const uint64_t got = exchange(mask, bits, source);
  T result;
  std::memcpy(&result, &got, sizeof(T));
  return result;
}
template <typename T>
T shfl(unsigned mask, T value, int source) {
  return shuffle_from(mask, value, source & (warpSize - 1));
}
template <typename T>
T shfl_down(unsigned mask, T value, unsigned delta) {
  const int source = lane_id() + static_cast<int>(delta);
  return shuffle_from(mask, value, source < warpSize ? source : lane_id());
}
template <typename T>
T shfl_up(unsigned mask, T value, unsigned delta) {
  const int source = lane_id() - static_cast<int>(delta);
  return shuffle_from(mask, value, source >= 0 ? source : lane_id());
}
template <typename T>
T shfl_xor(unsigned mask, T value, int lane_mask) {
  return shuffle_from(mask, value, lane_id() ^ lane_mask);
}
unsigned ballot(unsigned mask, bool predicate);

// Warp-collective operations of the whole warp (WMMA's mma_sync, the emulator's <mma.h>): every
// lane posts `value` (a pointer to its operands) and, once all have, reads every lane's into
// `lanes` (kAbsentLane for a lane that has exited or is outside the block); the lanes may then
// read each other's operands until warp_collective_end, a second barrier. Both barriers order
// memory, as the race checker should see a collective instruction.
constexpr uint64_t kAbsentLane = ~uint64_t(0);
void warp_collective_begin(uint64_t value, uint64_t (&lanes)[warpSize]);
void warp_collective_end();

// cp.async, the asynchronous copy from global into shared memory (the emulator's <mma_ptx.h>, for
// kernels/common/mma_sync.cuh): each thread keeps a queue of its copies, numbered by group (the
// number of commits it made before issuing them). async_copy_issue queues one; async_copy_commit
// closes the open group; async_copy_take_completed hands back, oldest first and one per call, each
// queued copy of a committed group that is not among the newest `pending` committed groups (what
// cp.async.wait_group `pending` must have completed), and false when none is left. Copies still
// queued when the thread exits are dropped: nothing could have waited for them.
struct AsyncCopy {
  void* shared_destination;
  const void* global_source;
  std::size_t bytes;         // copied: 4, 8 or 16
  std::size_t source_bytes;  // read from the source; the rest of `bytes` is zero-filled
};
void async_copy_issue(const AsyncCopy& copy);
void async_copy_commit();
bool async_copy_take_completed(int pending, AsyncCopy* copy);

// A launch failure raised by a device built-in that a GPU would fault on (a misaligned WMMA
// pointer, say): prints `why` with the kernel, block and thread, and is sticky, like __trap().
[[noreturn]] void fault(const char* why);

// Shared memory: cuda_translate turns each __shared__ variable into a reference to
// *shared_block(&layout), where `layout` is a static of the variable's type used only as a key.
// The first thread of a block to ask gets fresh memory filled with 0xFF bytes, the others of the
// block the same memory; it is freed when the block ends.
void* shared_block_bytes(const void* layout, std::size_t bytes, std::size_t alignment);
template <typename T>
T* shared_block(T* layout) {
  return static_cast<T*>(shared_block_bytes(layout, sizeof(T), alignof(T)));
}

// ---- launching ---------------------------------------------------------------------------------
struct LaunchConfig {
  dim3 grid, block;
  std::size_t dynamic_shared_bytes;
  cudaStream_t stream;
  const void* kernel = nullptr;  // the kernel function (launch_named sets it): its opt-ins
  LaunchConfig(dim3 grid_, dim3 block_, std::size_t shared = 0, cudaStream_t stream_ = nullptr)
      : grid(grid_), block(block_), dynamic_shared_bytes(shared), stream(stream_) {}
};

// Dynamic shared memory: cuda_translate turns `extern __shared__ T name[];` into a T* pointing at
// dynamic_shared_memory(alignment): the launch's dynamic_shared_bytes, fresh 0xFF-filled memory for
// each block (the same for all of its threads), with a shared-window address after the static
// variables the block touched before it. A launch may ask for more than 48 KiB only after
// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) raised the
// kernel's limit to at least that; static plus dynamic must then stay within the architecture's
// opt-in maximum (launch_resources.h). Stricter than a GPU in one way: the limit is kept per
// kernel function for the whole process (as CUDA keeps it per function per context).
void* dynamic_shared_memory(std::size_t alignment);
cudaError_t set_max_dynamic_shared_bytes(const void* kernel, int bytes);

// Forgets a sticky error (after a trap or a deadlock), as a fresh CUDA context would; for tests.
void reset_errors();

// The device's memory size (default 80 GB, as an H100; 0 restores it), and what is allocated now:
// tests lower the size to reach out-of-memory paths and count bytes to find leaks.
void set_device_memory_bytes(std::size_t bytes);
std::size_t allocated_device_bytes();

// True when `ptr` is null or points into (or one past) a live device allocation.
bool is_device_pointer_or_null(const void* ptr);
// Runs body() once per thread of the grid; records launch errors for cudaGetLastError.
void run_grid(const char* kernel_name, const LaunchConfig& config,
              const std::function<void()>& body);
// A launch as the runtime sees it (graph.cpp): run now with run_grid, recorded when config.stream
// captures, or refused (an error for cudaGetLastError) where a capture forbids it. `body` owns a
// copy of the arguments; `arguments_ok` checks its pointers again when a graph replays it.
void submit_launch(const char* kernel_name, const LaunchConfig& config, std::function<void()> body,
                   std::function<bool()> arguments_ok);
// Records a launch error (bad argument) for cudaGetLastError, printing why to stderr.
void fail_launch(cudaError_t error, const char* kernel_name, const char* why);

template <typename Param>
bool argument_ok(const Param& value) {
  if constexpr (std::is_pointer<Param>::value) {
    return is_device_pointer_or_null(static_cast<const void*>(value));
  } else {
    (void)value;
    return true;
  }
}

// A kernel launch: the arguments convert to the kernel's parameter types as in CUDA; pointer
// parameters must point into device memory, as a GPU would require.
template <typename... Params, typename... Args>
void launch_named(const char* kernel_name, void (*kernel)(Params...), const LaunchConfig& config,
                  Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel launched with the wrong arity");
  // Shared, so that a captured launch keeps its own copy of the arguments for every replay.
  const auto params =
      std::make_shared<std::tuple<std::decay_t<Params>...>>(std::forward<Args>(args)...);
  LaunchConfig with_kernel = config;
  with_kernel.kernel = reinterpret_cast<const void*>(kernel);
  std::function<bool()> pointers_ok = [params] {
    return std::apply([](const auto&... p) { return (argument_ok(p) && ... && true); }, *params);
  };
  if (!pointers_ok()) {
    fail_launch(cudaErrorInvalidDevicePointer, kernel_name,
                "a pointer argument is not device memory");
    return;
  }
  submit_launch(
      kernel_name, with_kernel, [kernel, params] { std::apply(kernel, *params); },
      std::move(pointers_ok));
}

}  // namespace emu

// As CUDA's template overload: the kernel function itself, not a symbol.
template <typename Kernel>
cudaError_t cudaFuncSetAttribute(Kernel* kernel, cudaFuncAttribute attribute, int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
  return emu::set_max_dynamic_shared_bytes(reinterpret_cast<const void*>(kernel), value);
}

// ---- device built-ins --------------------------------------------------------------------------
#define threadIdx (::emu::thread_idx())
#define blockIdx (::emu::block_idx())
#define blockDim (::emu::block_dim())
#define gridDim (::emu::grid_dim())

inline void __syncthreads() { emu::syncthreads(); }
// The SM's cycle counter; here the host's steady clock in nanoseconds (the profiler's hold kernel,
// kernels/common/kernel_profile.cu, spins on it).
inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline void __syncwarp(unsigned mask = 0xffffffffu) { emu::syncwarp(mask); }
[[noreturn]] inline void __trap() { emu::trap(); }
template <typename T>
T __shfl_sync(unsigned mask, T value, int source) {
  return emu::shfl(mask, value, source);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta) {
  return emu::shfl_down(mask, value, delta);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta) {
  return emu::shfl_up(mask, value, delta);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask) {
  return emu::shfl_xor(mask, value, lane_mask);
}
inline unsigned __ballot_sync(unsigned mask, bool predicate) {
  return emu::ballot(mask, predicate);
}
inline int __any_sync(unsigned mask, int predicate) {
  return emu::ballot(mask, predicate != 0) != 0;
}
inline int __all_sync(unsigned mask, int predicate) {
  return emu::ballot(mask, predicate != 0) == emu::ballot(mask, true);
}

// Round-to-nearest arithmetic that a GPU compiler may not fuse. engine_emulated is compiled with
// -ffp-contract=off (CMakeLists.txt; GCC's C++ default would fuse), so plain operators suffice.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline unsigned __float_as_uint(float x) {
  unsigned bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}
inline float __uint_as_float(unsigned bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(unsigned x) { return __builtin_ffs(static_cast<int>(x)); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
using std::isinf;
using std::isnan;
using std::max;
using std::min;

// Atomics: a grid runs on one host thread, so a read-modify-write would already be atomic; they
// are compiler atomics (relaxed, as CUDA's) so that the race checker (tests/support/cuda_emulator/
// racecheck.h) sees them as atomics and not as racing plain accesses.
template <typename T>
T atomicAdd(T* address, T value) {
  T old;
  __atomic_load(address, &old, __ATOMIC_RELAXED);
  T sum = old + value;
  while (
      !__atomic_compare_exchange(address, &old, &sum, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    sum = old + value;
  }
  return old;
}
template <typename T>
T atomicMax(T* address, T value) {
  T old;
  __atomic_load(address, &old, __ATOMIC_RELAXED);
  while (value > old && !__atomic_compare_exchange(address, &old, &value, false, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED)) {
  }
  return old;
}
