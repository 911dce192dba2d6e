// The CUDA emulator's runtime API: device memory (host memory, tracked so copies and kernel
// pointer arguments can be checked against it, and poisoned with 0xFF bytes when allocated),
// copies, errors, device properties and events (contract and limits: include/cuda_runtime.h;
// the grid scheduler is in scheduler.cpp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include <cuda_runtime.h>

#include "tests/support/cuda_emulator/state.h"

namespace emu::detail {

std::mutex api_mutex;
cudaError_t last_error = cudaSuccess;
cudaError_t sticky_error = cudaSuccess;

cudaError_t record(cudaError_t error) {
  if (error != cudaSuccess && last_error == cudaSuccess) last_error = error;
  return error;
}

}  // namespace emu::detail

namespace {

using emu::detail::api_mutex;
using emu::detail::kMaxStaticSharedBytes;
using emu::detail::kMaxThreadsPerBlock;
using emu::detail::last_error;
using emu::detail::record;
using emu::detail::sticky_error;

constexpr std::size_t kDefaultDeviceMemoryBytes = std::size_t(80) << 30;  // as an H100's 80 GB
std::size_t device_memory_bytes = kDefaultDeviceMemoryBytes;  // emu::set_device_memory_bytes
constexpr int kMultiProcessors = 132;  // as an H100 SXM: grids sized from it look the same

cudaError_t check_sticky() { return sticky_error; }

// ---- device memory -----------------------------------------------------------------------------
std::map<uintptr_t, std::size_t> allocations;  // base -> bytes
std::size_t allocated_bytes = 0;

// The allocation holding [ptr, ptr + bytes), or allocations.end().
std::map<uintptr_t, std::size_t>::const_iterator find_allocation(const void* ptr,
                                                                 std::size_t bytes) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  auto it = allocations.upper_bound(p);
  if (it == allocations.begin()) return allocations.end();
  --it;
  if (p + bytes > it->first + it->second) return allocations.end();
  return it;
}

bool device_range(const void* ptr, std::size_t bytes) {
  return bytes == 0 || find_allocation(ptr, bytes) != allocations.end();
}

bool visible() {
  const char* devices = std::getenv("CUDA_VISIBLE_DEVICES");
  if (devices == nullptr) return true;
  const std::string list(devices);
  return !list.empty() && list[0] != '-' && (list[0] == '0' || list.rfind("GPU", 0) == 0);
}

}  // namespace

namespace emu {

bool is_device_pointer_or_null(const void* ptr) {
  if (ptr == nullptr) return true;
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  auto it = allocations.upper_bound(p);
  if (it == allocations.begin()) return false;
  --it;
  return p <= it->first + it->second;
}

void set_device_memory_bytes(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(api_mutex);
  device_memory_bytes = bytes == 0 ? kDefaultDeviceMemoryBytes : bytes;
}

std::size_t allocated_device_bytes() {
  std::lock_guard<std::mutex> lock(api_mutex);
  return allocated_bytes;
}

void reset_errors() {
  std::lock_guard<std::mutex> lock(api_mutex);
  sticky_error = cudaSuccess;
  last_error = cudaSuccess;
}

}  // namespace emu

// ---- the runtime API ---------------------------------------------------------------------------
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources:
      return "too many resources requested for launch";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorIllegalState:
      return "the operation cannot be performed in the present state";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit:
      return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorStreamCaptureWrongThread:
      return "attempt to terminate a thread-local capture sequence from another thread";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() {
  std::lock_guard<std::mutex> lock(api_mutex);
  const cudaError_t error = sticky_error != cudaSuccess ? sticky_error : last_error;
  last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() {
  std::lock_guard<std::mutex> lock(api_mutex);
  return sticky_error != cudaSuccess ? sticky_error : last_error;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = visible() ? 1 : 0;
  return *count == 0 ? record(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return visible() ? cudaSuccess : record(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) {
  return visible() && device == 0 ? cudaSuccess : record(cudaErrorInvalidDevice);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!visible() || device != 0) return record(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "CUDA emulator on the CPU (not a GPU)");
  prop->totalGlobalMem = device_memory_bytes;
  prop->sharedMemPerBlock = kMaxStaticSharedBytes;
  prop->sharedMemPerBlockOptin = emu::detail::kMaxOptInSharedBytes;
  prop->warpSize = warpSize;
  prop->maxThreadsPerBlock = kMaxThreadsPerBlock;
  prop->multiProcessorCount = kMultiProcessors;
  prop->major = 9;
  prop->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (!visible() || device != 0) return record(cudaErrorInvalidDevice);
  switch (attribute) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = kMaxThreadsPerBlock;
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = kMultiProcessors;
      return cudaSuccess;
    case cudaDevAttrL2CacheSize:
      *value = 50 << 20;
      return cudaSuccess;
  }
  return record(cudaErrorInvalidValue);
}

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  std::lock_guard<std::mutex> lock(api_mutex);
  *total_bytes = device_memory_bytes;
  *free_bytes = allocated_bytes < device_memory_bytes ? device_memory_bytes - allocated_bytes : 0;
  return check_sticky();
}

namespace emu::detail {

cudaError_t allocate_locked(void** ptr, std::size_t bytes) {
  *ptr = nullptr;
  if (sticky_error != cudaSuccess) return record(sticky_error);
  if (bytes == 0) return cudaSuccess;
  if (allocated_bytes > device_memory_bytes || bytes > device_memory_bytes - allocated_bytes)
    return record(cudaErrorMemoryAllocation);
  void* memory = nullptr;
  if (posix_memalign(&memory, 256, bytes) != 0) return record(cudaErrorMemoryAllocation);
  std::memset(memory, 0xFF, bytes);  // never-written device memory reads as NaN / -1
  allocations[reinterpret_cast<uintptr_t>(memory)] = bytes;
  allocated_bytes += bytes;
  *ptr = memory;
  return cudaSuccess;
}

cudaError_t free_locked(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  auto it = allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocations.end()) {
    std::fprintf(stderr, "CUDA emulator: cudaFree of %p, which is not a device allocation\n", ptr);
    return record(cudaErrorInvalidDevicePointer);
  }
  allocated_bytes -= it->second;
  allocations.erase(it);
  std::free(ptr);
  return check_sticky();
}

}  // namespace emu::detail

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(api_mutex);
  *ptr = nullptr;
  const cudaError_t refused = emu::detail::check_capture_allows("cudaMalloc");
  if (refused != cudaSuccess) return refused;
  return emu::detail::allocate_locked(ptr, bytes);
}

cudaError_t cudaMallocAsync(void** ptr, std::size_t bytes, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(api_mutex);
  *ptr = nullptr;
  emu::detail::StreamRoute where;
  const cudaError_t refused = emu::detail::route(stream, "cudaMallocAsync", &where);
  if (refused != cudaSuccess) return refused;
  if (where == emu::detail::StreamRoute::kRecord)
    return emu::detail::record_allocation(stream, ptr, bytes);
  return emu::detail::allocate_locked(ptr, bytes);
}

cudaError_t cudaFree(void* ptr) {
  std::lock_guard<std::mutex> lock(api_mutex);
  const cudaError_t refused = emu::detail::check_capture_allows("cudaFree");
  if (refused != cudaSuccess) return refused;
  return emu::detail::free_locked(ptr);
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(api_mutex);
  emu::detail::StreamRoute where;
  const cudaError_t refused = emu::detail::route(stream, "cudaFreeAsync", &where);
  if (refused != cudaSuccess) return refused;
  if (where == emu::detail::StreamRoute::kRecord) return emu::detail::record_free(stream, ptr);
  return emu::detail::free_locked(ptr);
}

namespace {
struct DefaultPool {
  unsigned long long release_threshold = 0;  // CUDA's default: give memory back at every sync
} default_pool;
}  // namespace

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  std::lock_guard<std::mutex> lock(api_mutex);
  if (device != 0) return record(cudaErrorInvalidDevice);
  *pool = reinterpret_cast<cudaMemPool_t>(&default_pool);
  return check_sticky();
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, void* value) {
  std::lock_guard<std::mutex> lock(api_mutex);
  if (pool != reinterpret_cast<cudaMemPool_t>(&default_pool) || value == nullptr ||
      attribute != cudaMemPoolAttrReleaseThreshold) {
    return record(cudaErrorInvalidValue);
  }
  default_pool.release_threshold = *static_cast<unsigned long long*>(value);
  return check_sticky();
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, std::size_t) {
  std::lock_guard<std::mutex> lock(api_mutex);
  if (pool != reinterpret_cast<cudaMemPool_t>(&default_pool)) return record(cudaErrorInvalidValue);
  return check_sticky();
}

namespace emu::detail {

cudaError_t copy_locked(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  if (sticky_error != cudaSuccess) return record(sticky_error);
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  if ((src_device && !device_range(src, bytes)) || (dst_device && !device_range(dst, bytes))) {
    std::fprintf(stderr,
                 "CUDA emulator: cudaMemcpy of %zu bytes (kind %d) from %p to %p runs outside a "
                 "device allocation\n",
                 bytes, static_cast<int>(kind), src, dst);
    return record(cudaErrorInvalidValue);
  }
  // The CUDA runtime API says of cudaMemcpy's areas: "may not overlap". A GPU gives undefined
  // data, memmove would give the right answer and hide the bug, so the emulator refuses.
  const auto* d = static_cast<const unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (bytes != 0 && d < s + bytes && s < d + bytes) {
    std::fprintf(stderr,
                 "CUDA emulator: cudaMemcpy of %zu bytes from %p to %p: the areas overlap\n", bytes,
                 src, dst);
    return record(cudaErrorInvalidValue);
  }
  if (bytes != 0) std::memcpy(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t memset_locked(void* ptr, int value, std::size_t bytes) {
  if (sticky_error != cudaSuccess) return record(sticky_error);
  if (!device_range(ptr, bytes)) {
    std::fprintf(stderr,
                 "CUDA emulator: cudaMemset of %zu bytes at %p runs outside a device allocation\n",
                 bytes, ptr);
    return record(cudaErrorInvalidValue);
  }
  if (bytes != 0) std::memset(ptr, value, bytes);
  return cudaSuccess;
}

}  // namespace emu::detail

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(api_mutex);
  emu::detail::StreamRoute where;
  const cudaError_t refused = emu::detail::route(stream, "cudaMemcpyAsync", &where);
  if (refused != cudaSuccess) return refused;
  if (where == emu::detail::StreamRoute::kRunNow)
    return emu::detail::copy_locked(dst, src, bytes, kind);
  // Host memory here is pageable, and CUDA cannot capture a copy to or from pageable memory.
  if (kind != cudaMemcpyDeviceToDevice)
    return emu::detail::refuse_in_capture(stream, "a copy between host and device memory");
  if (!device_range(src, bytes) || !device_range(dst, bytes)) {
    return emu::detail::copy_locked(dst, src, bytes,
                                    kind);  // reports the bad range, copies nothing
  }
  emu::detail::record_copy(stream, dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  {
    std::lock_guard<std::mutex> lock(api_mutex);
    const cudaError_t refused = emu::detail::check_capture_allows("cudaMemcpy (synchronous)");
    if (refused != cudaSuccess) return refused;
  }
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t bytes, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(api_mutex);
  emu::detail::StreamRoute where;
  const cudaError_t refused = emu::detail::route(stream, "cudaMemsetAsync", &where);
  if (refused != cudaSuccess) return refused;
  if (where == emu::detail::StreamRoute::kRunNow)
    return emu::detail::memset_locked(ptr, value, bytes);
  if (!device_range(ptr, bytes)) return emu::detail::memset_locked(ptr, value, bytes);  // reports
  emu::detail::record_memset(stream, ptr, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(api_mutex);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  emu::detail::capture_status_locked(stream, &status);
  if (status != cudaStreamCaptureStatusNone)
    return emu::detail::refuse_in_capture(stream, "cudaStreamSynchronize");
  const cudaError_t refused = emu::detail::check_capture_allows("cudaStreamSynchronize");
  if (refused != cudaSuccess) return refused;
  return sticky_error != cudaSuccess ? record(sticky_error) : cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  std::lock_guard<std::mutex> lock(api_mutex);
  const cudaError_t refused = emu::detail::check_capture_allows("cudaDeviceSynchronize");
  if (refused != cudaSuccess) return refused;
  return sticky_error != cudaSuccess ? record(sticky_error) : cudaSuccess;
}

struct CUevent_st {
  std::chrono::steady_clock::time_point when;
};

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  *event = new CUevent_st();
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  event->when = std::chrono::steady_clock::now();  // launches are synchronous here
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }

cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) {
  *ms = std::chrono::duration<float, std::milli>(stop->when - start->when).count();
  return cudaSuccess;
}
