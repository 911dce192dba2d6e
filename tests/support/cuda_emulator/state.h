// State the emulator's two halves share (tests/support/cuda_emulator/scheduler.cpp, runtime.cpp):
// the error slots of the CUDA runtime and the lock that makes one API call or grid run at a time.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>

namespace emu::detail {

constexpr std::size_t kMaxStaticSharedBytes = 48 * 1024;
constexpr int kMaxThreadsPerBlock = 1024;

extern std::mutex api_mutex;      // one grid or API call at a time, whichever host thread asks
extern cudaError_t last_error;    // what cudaGetLastError returns (and clears)
extern cudaError_t sticky_error;  // after a trap or a deadlock, as in a broken CUDA context

// Keeps the first error for cudaGetLastError; returns `error`.
cudaError_t record(cudaError_t error);

}  // namespace emu::detail
