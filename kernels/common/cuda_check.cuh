// Checking every CUDA call and launch: a failure becomes engine::Error naming the op.
#pragma once

#include <cuda_runtime.h>

#include "kernels/common/check.h"
#include "kernels/common/device_counters.h"

// CUDA_CHECK(call, what): `what` is any streamable context, e.g. "conv2d_fprop N=", n.
// A failed call also leaves its error in the runtime's last-error slot; it is cleared here, so a
// caller that catches the error (say, out of memory) and goes on does not see it again from the
// next launch check. (After a sticky error, a broken context, every later call fails anyway.)
#define CUDA_CHECK(call, ...)                                                                \
  do {                                                                                       \
    cudaError_t status_ = (call);                                                            \
    if (status_ != cudaSuccess) {                                                            \
      (void)cudaGetLastError();                                                              \
      ::engine::fail("CUDA error in ", __VA_ARGS__, ": ", cudaGetErrorString(status_), " (", \
                     #call, ")");                                                            \
    }                                                                                        \
  } while (0)

// After a <<<...>>> launch: catches bad launch configurations without synchronizing. Every launch
// of ours passes here once, so this is where launches are counted and, while the profiler is on,
// timed (device_counters.h).
#define CUDA_CHECK_LAUNCH(...)                                                                \
  do {                                                                                        \
    CUDA_CHECK(cudaGetLastError(), __VA_ARGS__);                                              \
    if (::engine::kernels::count_kernel_launch()) {                                           \
      ::engine::kernels::profile_launch(::engine::kernels::launch_label(__VA_ARGS__), false); \
    }                                                                                         \
  } while (0)
