// Scratch device memory for one host function, given back on every way out of it.
//
// Several host functions (knn, retrieval, pairwise_distance's backward, reduce's split sums, the
// fused triplet loss) need a temporary buffer for the kernels they launch. They take it from the
// stream-ordered allocator (cudaMallocAsync on the current stream), so neither taking nor giving
// it back synchronizes the host.
//
// Between the two, a launch check, a cuBLAS call, a second allocation or a shape check may throw.
// A workspace freed by a plain cudaFreeAsync at the end of the function would then stay allocated
// for the life of the process; a caller that catches the error (say, out of memory) and tries
// again with a smaller block would lose device memory on every try. So:
//   - release(...) on the normal path frees the memory and checks the free like any CUDA call;
//   - if an error is thrown first, the destructor frees it without checking, because an error is
//     already on its way to the caller, and clears the runtime's error slot if that free failed,
//     so a later, unrelated check does not report it.
// An allocation that fails says how much was asked for and how much the device has free.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/common/cuda_check.cuh"

namespace engine::kernels {

// The stream-ordered pool keeps what is freed into it. By default (release threshold 0) it hands
// its memory back to the driver at every stream, event or device synchronization, so the first
// workspace after each one (every training step syncs) would map physical memory again. Set
// once per process, for the current device, before the first workspace; the caching allocator
// trims the pool when a cudaMalloc runs out of memory (cuda_trim_workspace_pool).
inline void keep_workspace_pool_memory_once() {
  static const bool done = [] {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device), "workspace pool: cudaGetDevice");
    cudaMemPool_t pool = nullptr;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device), "workspace pool of device ", device);
    unsigned long long keep_all = ~0ULL;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all),
               "workspace pool of device ", device, ": release threshold");
    return true;
  }();
  (void)done;
}

// `bytes` rounded up to 256, the alignment of what cudaMallocAsync returns: a workspace carved
// into slices of these sizes gives every slice that alignment too.
inline std::size_t workspace_aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

class StreamWorkspace {
 public:
  // Allocates `bytes` (none when 0) on `stream`; `what...` names the caller in errors.
  template <typename... Context>
  StreamWorkspace(std::size_t bytes, cudaStream_t stream, const Context&... what)
      : stream_(stream) {
    if (bytes == 0) return;
    keep_workspace_pool_memory_once();
    const cudaError_t status = cudaMallocAsync(&base_, bytes, stream);
    count_workspace_allocation();
    if (status == cudaSuccess) return;
    base_ = nullptr;
    (void)cudaGetLastError();
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
    constexpr double kMiB = 1024.0 * 1024.0;
    fail("CUDA error in ", what..., ": workspace of ", bytes, " bytes (", bytes / kMiB,
         " MiB) with ", free_bytes / kMiB, " MiB free of ", total_bytes / kMiB,
         " MiB: ", cudaGetErrorString(status));
  }

  ~StreamWorkspace() {
    if (base_ != nullptr && cudaFreeAsync(base_, stream_) != cudaSuccess) (void)cudaGetLastError();
  }

  StreamWorkspace(const StreamWorkspace&) = delete;
  StreamWorkspace& operator=(const StreamWorkspace&) = delete;

  // The start of the memory (null for an empty workspace), 256-byte aligned as cudaMallocAsync's.
  char* bytes() const { return static_cast<char*>(base_); }

  // Frees the memory now and checks the free; `what...` names the caller in errors.
  template <typename... Context>
  void release(const Context&... what) {
    void* base = base_;
    base_ = nullptr;  // never freed twice, even if this free fails
    if (base != nullptr) CUDA_CHECK(cudaFreeAsync(base, stream_), what...);
  }

 private:
  void* base_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace engine::kernels
