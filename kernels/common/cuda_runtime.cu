// Thin, checked wrappers over the CUDA runtime (see cuda_runtime.h for the contract).
#include <cuda_runtime.h>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/cuda_runtime.h"
#include "kernels/common/device_counters.h"

namespace engine::kernels {

namespace {
thread_local cudaStream_t current = nullptr;  // nullptr = the legacy default stream
constexpr double kMiB = 1024.0 * 1024.0;
}  // namespace

int cuda_device_count() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the error: "no GPU" is a normal answer, not a failure
    return 0;
  }
  return count;
}

const char* cuda_device_name(int device) {
  static thread_local cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device), "cuda_device_name(", device, ")");
  return prop.name;
}

int cuda_multiprocessor_count() {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device), "cuda_multiprocessor_count: cudaGetDevice");
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
             "cuda_multiprocessor_count(", device, ")");
  return sms;
}

void cuda_set_device(int device) {
  CUDA_CHECK(cudaSetDevice(device), "cudaSetDevice(", device, ")");
}

void* cuda_malloc(std::size_t bytes) {
  void* ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, bytes);
  count_device_allocation();
  if (status != cudaSuccess) {
    cudaGetLastError();
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) cudaGetLastError();
    fail("CUDA out of memory: asked for ", bytes, " bytes (", bytes / kMiB, " MiB) with ",
         free_bytes / kMiB, " MiB free of ", total_bytes / kMiB,
         " MiB: ", cudaGetErrorString(status));
  }
  return ptr;
}

void cuda_free(void* ptr) { CUDA_CHECK(cudaFree(ptr), "cuda_free"); }

void cuda_memcpy_host_to_device(void* dst, const void* src, std::size_t bytes) {
  // From pageable memory this returns once the source has been staged, so `src` may be reused.
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, current),
             "copy host->device of ", bytes, " bytes");
}

void cuda_memcpy_device_to_host(void* dst, const void* src, std::size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, current),
             "copy device->host of ", bytes, " bytes");
  CUDA_CHECK(cudaStreamSynchronize(current), "copy device->host of ", bytes, " bytes");
  if (profiling()) profile_after_host_wait();
}

void cuda_memcpy_device_to_device(void* dst, const void* src, std::size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, current),
             "copy device->device of ", bytes, " bytes");
}

void cuda_memset_zero(void* ptr, std::size_t bytes) {
  CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, current), "memset of ", bytes, " bytes");
}

void* cuda_current_stream() { return current; }

void cuda_set_current_stream(void* stream) { current = static_cast<cudaStream_t>(stream); }

void cuda_trim_workspace_pool() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device), "cuda_trim_workspace_pool: cudaGetDevice");
  cudaMemPool_t pool = nullptr;
  CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device), "cuda_trim_workspace_pool(", device, ")");
  // Memory freed by cudaFreeAsync returns to the pool when the stream reaches the free.
  CUDA_CHECK(cudaDeviceSynchronize(), "cuda_trim_workspace_pool: synchronize");
  CUDA_CHECK(cudaMemPoolTrimTo(pool, 0), "cuda_trim_workspace_pool(", device, ")");
}

void cuda_synchronize() {
  CUDA_CHECK(cudaStreamSynchronize(current), "cuda_synchronize");
  if (profiling()) profile_after_host_wait();
}

void* cuda_stream_create() {
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cuda_stream_create");
  return stream;
}

void cuda_stream_destroy(void* stream) {
  CUDA_CHECK(cudaStreamDestroy(static_cast<cudaStream_t>(stream)), "cuda_stream_destroy");
}

void cuda_begin_capture(void* stream) {
  CUDA_CHECK(
      cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeThreadLocal),
      "cuda_begin_capture");
}

void* cuda_end_capture(void* stream) {
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph),
             "cuda_end_capture (a call inside the captured code that CUDA cannot capture: a host "
             "synchronization, a copy to or from host memory, or cudaMalloc)");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  CUDA_CHECK(cudaGraphDestroy(graph), "cuda_end_capture: cudaGraphDestroy");
  CUDA_CHECK(status, "cuda_end_capture: cudaGraphInstantiate");
  return exec;
}

void cuda_abandon_capture(void* stream) {
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph) == cudaSuccess &&
      graph != nullptr) {
    (void)cudaGraphDestroy(graph);
  }
  (void)cudaGetLastError();  // the captured code's error is already on its way to the caller
}

void cuda_graph_launch(void* graph_exec) {
  CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph_exec), current),
             "cuda_graph_launch");
}

void cuda_graph_destroy(void* graph_exec) {
  CUDA_CHECK(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph_exec)), "cuda_graph_destroy");
}

}  // namespace engine::kernels
