// The CUDA runtime as the rest of the project sees it: plain C++ declarations, no CUDA headers.
// Implemented in cuda_runtime.cu; without CUDA, cuda_runtime_stub.cpp provides versions where
// cuda_device_count() is 0 and everything else throws "built without CUDA".
//
// Device discovery is lazy (never at static-initialization time) and total: any CUDA error while
// asking (no driver, driver too old, no device) means zero devices, and the error is cleared.
#pragma once

#include <cstddef>
#include <cstdint>

namespace engine::kernels {

int cuda_device_count();
const char* cuda_device_name(int device);  // e.g. "NVIDIA H100 80GB HBM3"
int cuda_multiprocessor_count();           // SMs of the current device (132 on an H100 SXM)
void cuda_set_device(int device);          // cudaSetDevice for the calling thread (the only one
                                           // that runs CUDA work)

void* cuda_malloc(std::size_t bytes);  // throws engine::Error naming the size on failure (OOM)
void cuda_free(void* ptr);
void cuda_memcpy_host_to_device(void* dst, const void* src, std::size_t bytes);
void cuda_memcpy_device_to_host(void* dst, const void* src, std::size_t bytes);
void cuda_memcpy_device_to_device(void* dst, const void* src, std::size_t bytes);
void cuda_memset_zero(void* ptr, std::size_t bytes);
// Gives the memory that the kernels' workspaces (cudaMallocAsync) freed back to the driver, so a
// cudaMalloc that ran out of memory can try again (engine/allocator.cpp).
void cuda_trim_workspace_pool();

// All kernels launch on the current stream (one per host thread, the default stream unless set).
// Copies to the host synchronize that stream; nothing else does.
void* cuda_current_stream();
void cuda_set_current_stream(void* stream);
void cuda_synchronize();

// CUDA graphs (engine/cuda_graph.h says how the engine uses them). A capture runs on a stream of
// its own, non-blocking so that other threads' work on the legacy stream neither joins nor breaks
// it, in thread-local mode: a call that cannot be captured (a synchronization, a copy to or from
// the host, cudaMalloc) made by the capturing thread fails and invalidates the capture.
void* cuda_stream_create();  // cudaStreamNonBlocking
void cuda_stream_destroy(void* stream);
void cuda_begin_capture(void* stream);
// Ends the capture and instantiates it: the graph instance (cudaGraphExec_t). Throws
// engine::Error when the capture was invalidated, naming the first refused call's error.
void* cuda_end_capture(void* stream);
// Ends a capture after an error in the captured code, discarding it (never throws).
void cuda_abandon_capture(void* stream);
void cuda_graph_launch(void* graph_exec);  // on the current stream
void cuda_graph_destroy(void* graph_exec);

}  // namespace engine::kernels
