// copy_strided, CUDA.
// Math:      dst[flat] = src[offset(flat)], offset from the row-major multi-index and strides.
// Layout:    src any strides (0 = broadcast), dst contiguous f32.
// Parallel:  one thread per output element (grid-stride); the index is decomposed per element,
//            dst writes are coalesced, src reads are coalesced when the last stride is 1.
// Cost:      0 FLOPs; 8n bytes (one read, one write per element). Floor: 8n / bandwidth.
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/copy/copy.h"

namespace engine::kernels {

namespace {
__global__ void copy_strided_kernel(const float* src, StridedLayout layout, float* dst,
                                    int64_t total) {
  for (int64_t flat = grid_thread_index(); flat < total; flat += grid_thread_count()) {
    int64_t rest = flat, src_offset = 0;
    for (int d = layout.ndim - 1; d >= 0; --d) {
      int64_t i = rest % layout.shape[d];
      rest /= layout.shape[d];
      src_offset += i * layout.strides[d];
    }
    dst[flat] = src[src_offset];
  }
}

__global__ void copy_into_strided_kernel(const float* src, float* dst, StridedLayout layout,
                                         int64_t total) {
  for (int64_t flat = grid_thread_index(); flat < total; flat += grid_thread_count()) {
    int64_t rest = flat, dst_offset = 0;
    for (int d = layout.ndim - 1; d >= 0; --d) {
      int64_t i = rest % layout.shape[d];
      rest /= layout.shape[d];
      dst_offset += i * layout.strides[d];
    }
    dst[dst_offset] = src[flat];
  }
}
}  // namespace

void copy_strided_cuda(const float* src, StridedLayout layout, float* dst) {
  int64_t total = 1;
  for (int d = 0; d < layout.ndim; ++d) total *= layout.shape[d];
  if (total == 0) return;
  constexpr int kThreads = 256;
  copy_strided_kernel<<<grid_for(total, kThreads), kThreads, 0, current_stream()>>>(src, layout,
                                                                                    dst, total);
  CUDA_CHECK_LAUNCH("copy_strided_cuda n=", total);
}

}  // namespace engine::kernels

namespace engine::kernels {

void copy_into_strided_cuda(const float* src, float* dst, StridedLayout layout) {
  int64_t total = 1;
  for (int d = 0; d < layout.ndim; ++d) total *= layout.shape[d];
  if (total == 0) return;
  constexpr int kThreads = 256;
  copy_into_strided_kernel<<<grid_for(total, kThreads), kThreads, 0, current_stream()>>>(
      src, dst, layout, total);
  CUDA_CHECK_LAUNCH("copy_into_strided_cuda n=", total);
}

}  // namespace engine::kernels
