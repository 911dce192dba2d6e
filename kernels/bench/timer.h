// CUDA events and device facts for `dml bench`, behind plain C++ declarations (tools never include
// CUDA headers). Without CUDA the stubs throw "built without CUDA" like every other *_cuda entry.
//
// Use: record a start and a stop event on the current stream around the work to time, then ask for
// the elapsed time once the stop event has completed (cuda_event_elapsed_ms waits for it). Events
// record on the GPU timeline, so the host-side cost of enqueueing is not measured -- only what the
// device spent between the two points (the kernel plus any launch gap if the queue ran dry).
#pragma once

#include <cstdint>

namespace engine::kernels {

// An opaque cudaEvent_t with timing enabled; release with cuda_event_destroy.
void* cuda_event_create();
void cuda_event_destroy(void* event);
// Enqueues the event on the current stream (cuda_current_stream()).
void cuda_event_record(void* event);
// Milliseconds between two recorded events; blocks the host until `stop` has completed.
float cuda_event_elapsed_ms(void* start, void* stop);

// The current device's L2 cache size in bytes (cudaDevAttrL2CacheSize): benchmarks rotate their
// inputs over enough buffers that a repeated launch cannot find its data still in L2.
int64_t cuda_l2_cache_bytes();

}  // namespace engine::kernels
