// CUDA events and device facts for `dml bench` (contract in timer.h).
// Math/layout/parallelization: none -- thin checked wrappers over the CUDA runtime. Cost: an event
// record is a few hundred nanoseconds of host time and moves no data; the elapsed-time query
// synchronizes on the stop event only.
#include <cuda_runtime.h>

#include "kernels/bench/timer.h"
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/cuda_runtime.h"

namespace engine::kernels {

void* cuda_event_create() {
  cudaEvent_t event = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDefault), "cuda_event_create");
  return event;
}

void cuda_event_destroy(void* event) {
  CUDA_CHECK(cudaEventDestroy(static_cast<cudaEvent_t>(event)), "cuda_event_destroy");
}

void cuda_event_record(void* event) {
  CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event),
                             static_cast<cudaStream_t>(cuda_current_stream())),
             "cuda_event_record");
}

float cuda_event_elapsed_ms(void* start, void* stop) {
  CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(stop)), "cuda_event_elapsed_ms");
  float ms = 0.0f;
  CUDA_CHECK(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(stop)),
      "cuda_event_elapsed_ms");
  return ms;
}

int64_t cuda_l2_cache_bytes() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device), "cuda_l2_cache_bytes");
  int bytes = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, device),
             "cuda_l2_cache_bytes(device ", device, ")");
  return bytes;
}

}  // namespace engine::kernels
