// Checking every CUDA call and launch: a failure becomes engine::Error naming the op.
#pragma once

#include <cuda_runtime.h>

#include "kernels/common/check.h"

// CUDA_CHECK(call, what): `what` is any streamable context, e.g. "conv2d_fprop N=", n.
#define CUDA_CHECK(call, ...)                                                                \
  do {                                                                                       \
    cudaError_t status_ = (call);                                                            \
    if (status_ != cudaSuccess) {                                                            \
      ::engine::fail("CUDA error in ", __VA_ARGS__, ": ", cudaGetErrorString(status_), " (", \
                     #call, ")");                                                            \
    }                                                                                        \
  } while (0)

// After a <<<...>>> launch: catches bad launch configurations without synchronizing.
#define CUDA_CHECK_LAUNCH(...) CUDA_CHECK(cudaGetLastError(), __VA_ARGS__)
