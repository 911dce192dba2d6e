// index_select, CUDA: gather rows by an i64 index (f32 and i64), and the scatter-add that is
// its gradient (f32) (math and layout: index_select.h).
//
// Math:     forward   out[i, e] = x[index[i], e]                     i < count, e < row_size
//           backward  dx[r, e] = sum_{i : index[i] = r} dy[i, e]    (dx zeroed first)
// Layout:   x / dx are `rows` contiguous rows of `row_size` elements; out / dy [count, row_size];
//           index: `count` int64 on the device.
// Parallel: one thread per element of out (forward) or dy (backward), grid-stride: f ->
//           i = f / row_size, e = f % row_size. Consecutive threads walk one row, so reads and
//           writes of a row are coalesced; each thread reads index[i] (cached: one row's threads
//           share it).
//           The forward checks each index in-kernel (no host sync); a bad one is reported with
//           printf + __trap() (index_select.h says how that surfaces).
//           The backward zeroes dx (cudaMemsetAsync) and adds with atomicAdd: rows that are
//           picked several times receive their contributions in an unspecified order, so the
//           result is non-deterministic in the last bits. (No index check here: the forward
//           checked the same index tensor.)
// Cost:     no FLOPs forward: count * row_size elements read and written (8 bytes each for f32,
//           plus 8 bytes per row for the index); backward count * row_size atomic adds plus
//           4 * rows * row_size bytes of zeroing. Floor: bytes / bandwidth (atomics on distinct
//           addresses run at close to store speed; repeated indices serialize in L2).
#include <cstdint>
#include <cstdio>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/index_select/index_select.h"

namespace engine::kernels {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void index_select_forward_kernel(const T* x, int64_t rows, int64_t row_size,
                                            const int64_t* index, int64_t count, T* out) {
  for (int64_t f = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; f < count * row_size;
       f += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = f / row_size, e = f % row_size;
    const int64_t row = index[i];
    if (row < 0 || row >= rows) {
      printf(
          "index_select_cuda: index %lld (at position %lld) is out of range for dimension 0 "
          "of size %lld\n",
          static_cast<long long>(row), static_cast<long long>(i), static_cast<long long>(rows));
      __trap();
    }
    out[f] = x[row * row_size + e];
  }
}

__global__ void index_select_backward_kernel(const float* dy, const int64_t* index, int64_t count,
                                             int64_t row_size, float* dx) {
  for (int64_t f = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; f < count * row_size;
       f += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = f / row_size, e = f % row_size;
    atomicAdd(&dx[index[i] * row_size + e], dy[f]);
  }
}

template <typename T>
void forward_launch(const T* x, int64_t rows, int64_t row_size, const int64_t* index, int64_t count,
                    T* out) {
  const int64_t total = count * row_size;
  if (total == 0) return;
  index_select_forward_kernel<T><<<grid_for(total, kThreads), kThreads, 0, current_stream()>>>(
      x, rows, row_size, index, count, out);
  CUDA_CHECK_LAUNCH("index_select_forward_cuda x [", rows, ", ", row_size, "] count=", count);
}

}  // namespace

void index_select_forward_cuda(const float* x, int64_t rows, int64_t row_size, const int64_t* index,
                               int64_t count, float* out) {
  forward_launch<float>(x, rows, row_size, index, count, out);
}

void index_select_forward_cuda(const int64_t* x, int64_t rows, int64_t row_size,
                               const int64_t* index, int64_t count, int64_t* out) {
  forward_launch<int64_t>(x, rows, row_size, index, count, out);
}

void index_select_backward_cuda(const float* dy, const int64_t* index, int64_t count, int64_t rows,
                                int64_t row_size, float* dx) {
  if (rows * row_size == 0) return;
  cudaStream_t stream = current_stream();
  CUDA_CHECK(
      cudaMemsetAsync(dx, 0, static_cast<std::size_t>(rows * row_size) * sizeof(float), stream),
      "index_select_backward_cuda zeroing dx [", rows, ", ", row_size, "]");
  const int64_t total = count * row_size;
  if (total == 0) return;
  index_select_backward_kernel<<<grid_for(total, kThreads), kThreads, 0, stream>>>(dy, index, count,
                                                                                   row_size, dx);
  CUDA_CHECK_LAUNCH("index_select_backward_cuda dx [", rows, ", ", row_size, "] count=", count);
}

}  // namespace engine::kernels
