// Compiled instead of every *.cu file when the project is built without CUDA (ENGINE_CUDA=OFF or
// no nvcc). Device discovery answers "no devices"; every other CUDA entry point throws, so a CUDA
// code path can never silently fall back to something else. When you add a *_cuda function,
// add its stub here (docs/adding-an-op.md).
#include "kernels/axpy/axpy.h"
#include "kernels/common/check.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/copy/copy.h"
#include "kernels/fill/fill.h"
#include "kernels/random/random.h"

namespace engine::kernels {

namespace {
[[noreturn]] void no_cuda(const char* function) {
  fail(function, ": this binary was built without CUDA (configure with -DENGINE_CUDA=ON)");
}
}  // namespace

// ---- runtime ----
int cuda_device_count() { return 0; }
const char* cuda_device_name(int) { no_cuda("cuda_device_name"); }
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
void cuda_synchronize() { no_cuda("cuda_synchronize"); }

// ---- kernels ----
void fill_cuda(float*, int64_t, float) { no_cuda("fill_cuda"); }
void axpy_cuda(int64_t, float, const float*, float*) { no_cuda("axpy_cuda"); }
void copy_strided_cuda(const float*, StridedLayout, float*) { no_cuda("copy_strided_cuda"); }
void copy_into_strided_cuda(const float*, float*, StridedLayout) {
  no_cuda("copy_into_strided_cuda");
}
void random_uniform_cuda(float*, int64_t, uint64_t, uint64_t, float, float) {
  no_cuda("random_uniform_cuda");
}
void random_normal_cuda(float*, int64_t, uint64_t, uint64_t, float, float) {
  no_cuda("random_normal_cuda");
}

}  // namespace engine::kernels
