// timer_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/bench/timer.h"
#include "kernels/common/cuda_stub.h"

namespace engine::kernels {

void* cuda_event_create() { no_cuda("cuda_event_create"); }

void cuda_event_destroy(void*) { no_cuda("cuda_event_destroy"); }

void cuda_event_record(void*) { no_cuda("cuda_event_record"); }

float cuda_event_elapsed_ms(void*, void*) { no_cuda("cuda_event_elapsed_ms"); }

int64_t cuda_l2_cache_bytes() { no_cuda("cuda_l2_cache_bytes"); }

}  // namespace engine::kernels
