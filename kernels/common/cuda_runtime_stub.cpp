// cuda_runtime.cu's functions in a build without CUDA (kernels/common/cuda_stub.h): device
// discovery answers "no devices" and the current stream is null; everything else throws.
#include "kernels/common/cuda_runtime.h"
#include "kernels/common/cuda_stub.h"

namespace engine::kernels {

int cuda_device_count() { return 0; }
const char* cuda_device_name(int) { no_cuda("cuda_device_name"); }
int cuda_multiprocessor_count() { no_cuda("cuda_multiprocessor_count"); }
void cuda_set_device(int) { no_cuda("cuda_set_device"); }
void* cuda_malloc(std::size_t) { no_cuda("cuda_malloc"); }
void cuda_free(void*) { no_cuda("cuda_free"); }
void cuda_memcpy_host_to_device(void*, const void*, std::size_t) {
  no_cuda("cuda_memcpy_host_to_device");
}
void cuda_memcpy_device_to_host(void*, const void*, std::size_t) {
  no_cuda("cuda_memcpy_device_to_host");
}
void cuda_memcpy_device_to_device(void*, const void*, std::size_t) {
  no_cuda("cuda_memcpy_device_to_device");
}
void cuda_memset_zero(void*, std::size_t) { no_cuda("cuda_memset_zero"); }
void* cuda_current_stream() { return nullptr; }
void cuda_set_current_stream(void*) { no_cuda("cuda_set_current_stream"); }
void cuda_trim_workspace_pool() { no_cuda("cuda_trim_workspace_pool"); }
void cuda_synchronize() { no_cuda("cuda_synchronize"); }
void* cuda_stream_create() { no_cuda("cuda_stream_create"); }
void cuda_stream_destroy(void*) { no_cuda("cuda_stream_destroy"); }
void cuda_begin_capture(void*) { no_cuda("cuda_begin_capture"); }
void* cuda_end_capture(void*) { no_cuda("cuda_end_capture"); }
void cuda_abandon_capture(void*) {}
void cuda_graph_launch(void*) { no_cuda("cuda_graph_launch"); }
void cuda_graph_destroy(void*) { no_cuda("cuda_graph_destroy"); }

}  // namespace engine::kernels
