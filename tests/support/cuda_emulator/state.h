// State the emulator's parts share (tests/support/cuda_emulator/scheduler.cpp, shared_memory.cpp,
// runtime.cpp, graph.cpp): the error slots of the CUDA runtime, the lock that makes one API call or
// grid run at a time, the running block's shared memory, device memory, and the stream captures
// every call on a stream consults.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>
#include <string>

namespace emu::detail {

constexpr std::size_t kMaxStaticSharedBytes = 48 * 1024;
// What a block may have with the dynamic-shared-memory opt-in, static and dynamic together: the
// largest of the architectures the build targets (sm_90's 227 KiB; launch_resources.h holds each
// kernel to its own architecture's).
constexpr std::size_t kMaxOptInSharedBytes = 232448;
constexpr int kMaxThreadsPerBlock = 1024;

extern std::mutex api_mutex;      // one grid or API call at a time, whichever host thread asks
extern cudaError_t last_error;    // what cudaGetLastError returns (and clears)
extern cudaError_t sticky_error;  // after a trap or a deadlock, as in a broken CUDA context

// Keeps the first error for cudaGetLastError; returns `error`.
cudaError_t record(cudaError_t error);

// ---- the running grid (scheduler.cpp and shared_memory.cpp); api_mutex held -----------------
// Fails the running block: prints `why` with the kernel and block, makes `error` sticky (as a
// trap does in a CUDA context) and abandons the rest of the grid.
void fail_running_block(cudaError_t error, const std::string& why);
// The scheduler calls these around each block it runs: a block starts with no shared memory (its
// launch's `dynamic_bytes` are allocated on first use) and its memory is freed after it.
void begin_block_shared_memory(std::size_t dynamic_bytes);
void end_block_shared_memory();
// The most dynamic shared memory a launch of `kernel` may ask for: 48 KiB, or what
// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ...) set (then
// *opted_in is true).
std::size_t dynamic_shared_limit(const void* kernel, bool* opted_in);

// ---- device memory (runtime.cpp); every function here expects api_mutex held -----------------
cudaError_t allocate_locked(void** ptr, std::size_t bytes);  // 0xFF-filled, tracked
cudaError_t free_locked(void* ptr);
// A copy or memset, checked against the allocations (an error, printed, when outside one).
cudaError_t copy_locked(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
cudaError_t memset_locked(void* ptr, int value, std::size_t bytes);

// ---- stream capture (graph.cpp); api_mutex held ----------------------------------------------
enum class StreamRoute { kRunNow, kRecord };
// Where work on `stream` goes: run now, or recorded into the stream's capture. An error (recorded
// for cudaGetLastError, printed with `what`, and the capture invalidated) where a capture refuses
// it: the capture was invalidated before, or the legacy stream is used by a capturing thread.
cudaError_t route(cudaStream_t stream, const char* what, StreamRoute* where);
// For a call that may synchronize or allocate (cudaMalloc, cudaFree, cudaMemcpy, a synchronize):
// cudaErrorStreamCaptureUnsupported, each such capture invalidated, where an active capture's mode
// forbids it to this thread.
cudaError_t check_capture_allows(const char* what);
// Refuses `what` on the capturing `stream`: the capture is invalidated.
cudaError_t refuse_in_capture(cudaStream_t stream, const char* what);
// What cudaStreamIsCapturing answers for `stream`.
void capture_status_locked(cudaStream_t stream, cudaStreamCaptureStatus* status);
// Appends to the capture of `stream` (route() answered kRecord).
void record_copy(cudaStream_t stream, void* dst, const void* src, std::size_t bytes);
void record_memset(cudaStream_t stream, void* ptr, int value, std::size_t bytes);
cudaError_t record_allocation(cudaStream_t stream, void** ptr, std::size_t bytes);
cudaError_t record_free(cudaStream_t stream, void* ptr);

}  // namespace emu::detail
