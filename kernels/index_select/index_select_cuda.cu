// index_select, CUDA: gather rows by an i64 index (f32 and i64), and the scatter-add that is
// its gradient (f32) (math and layout: index_select.h).
//
// Math:     forward   out[i, e] = x[index[i], e]                     i < count, e < row_size
//           backward  dx[r, e] = sum_{i : index[i] = r} dy[i, e]    summed in ascending i from 0
// Layout:   x / dx are `rows` contiguous rows of `row_size` elements; out / dy [count, row_size];
//           index: `count` int64 on the device.
// Parallel: forward: one thread per element of out, grid-stride: f -> i = f / row_size,
//           e = f % row_size. Consecutive threads walk one row, so reads and writes of a row are
//           coalesced; each thread reads index[i] (cached: one row's threads share it). It checks
//           each index in-kernel (no host sync); a bad one is reported with printf + __trap()
//           (index_select.h says how that surfaces).
//           backward: deterministic, the same sums in the same order as the CPU reference, so
//           the same bits (a scatter with atomicAdd would add repeated rows in whatever order the
//           blocks ran: a result that changes from run to run, which would break bit-identical
//           resume on a GPU). Three steps, no host sync:
//           1. key_kernel: key[i] = index[i] * count + i, unique, so sorting the keys groups the
//              positions of each row in ascending order;
//           2. CUB's DeviceRadixSort::SortKeys over the low ceil(log2(rows * count)) bits;
//           3. segment_kernel: position[s] = sorted[s] % count, and where the row changes
//              between neighbours, first[r] = s and last[r] = s + 1 (rows never picked keep
//              first = last = 0 from a memset);
//           4. sum_rows_kernel: one thread per element of dx, grid-stride like the forward:
//              dx[r, e] = 0 + dy[position[first[r]], e] + ... in ascending position, additions
//              only (no FMA to contract). Every element of dx is written, so no zeroing.
//           (No index check here: the forward checked the same index tensor.)
// Cost:     no FLOPs forward: count * row_size elements read and written (8 bytes each for f32,
//           plus 8 bytes per row for the index). Backward: count * row_size adds; bytes
//           4 * count * row_size read (dy, each row once: a row's threads read the same dy rows)
//           + 4 * rows * row_size written, plus the sort of count 8-byte keys (a few passes of
//           16 * count bytes; negligible beside the rows for any row_size above a few dozen).
//           Floor: those bytes / bandwidth.
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cub/device/device_radix_sort.cuh>

#include "kernels/common/check.h"
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/cuda_workspace.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/index_select/index_select.h"

namespace engine::kernels {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void index_select_forward_kernel(const T* x, int64_t rows, int64_t row_size,
                                            const int64_t* index, int64_t count, T* out) {
  for (int64_t f = grid_thread_index(); f < count * row_size; f += grid_thread_count()) {
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

__global__ void key_kernel(const int64_t* index, int64_t count, uint64_t* keys) {
  for (int64_t i = grid_thread_index(); i < count; i += grid_thread_count()) {
    keys[i] =
        static_cast<uint64_t>(index[i]) * static_cast<uint64_t>(count) + static_cast<uint64_t>(i);
  }
}

__global__ void segment_kernel(const uint64_t* sorted, int64_t count, int64_t* position,
                               int64_t* first, int64_t* last) {
  const uint64_t n = static_cast<uint64_t>(count);
  for (int64_t s = grid_thread_index(); s < count; s += grid_thread_count()) {
    const uint64_t row = sorted[s] / n;
    position[s] = static_cast<int64_t>(sorted[s] % n);
    if (s == 0 || sorted[s - 1] / n != row) first[row] = s;
    if (s == count - 1 || sorted[s + 1] / n != row) last[row] = s + 1;
  }
}

__global__ void sum_rows_kernel(const float* dy, const int64_t* position, const int64_t* first,
                                const int64_t* last, int64_t rows, int64_t row_size, float* dx) {
  for (int64_t f = grid_thread_index(); f < rows * row_size; f += grid_thread_count()) {
    const int64_t r = f / row_size, e = f % row_size;
    float sum = 0.0f;
    for (int64_t s = first[r]; s < last[r]; ++s) sum += dy[position[s] * row_size + e];
    dx[f] = sum;
  }
}

// Bits of the largest key, rows * count - 1 (at least 1): the sort's end_bit.
int key_bits(int64_t rows, int64_t count) {
  const uint64_t largest = static_cast<uint64_t>(rows) * static_cast<uint64_t>(count) - 1;
  int bits = 1;
  while (bits < 64 && (largest >> bits) != 0) ++bits;
  return bits;
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
  if (count == 0) {
    CUDA_CHECK(
        cudaMemsetAsync(dx, 0, static_cast<std::size_t>(rows * row_size) * sizeof(float), stream),
        "index_select_backward_cuda zeroing dx [", rows, ", ", row_size, "]");
    return;
  }
  // CUB counts items in an int; the keys index * count + i must fit in 64 bits.
  ENGINE_CHECK(count <= INT_MAX, "index_select_backward_cuda: ", count,
               " indices, more than 2^31 - 1");
  ENGINE_CHECK(static_cast<uint64_t>(rows) <= UINT64_MAX / static_cast<uint64_t>(count),
               "index_select_backward_cuda: ", rows, " rows x ", count,
               " indices do not fit the 64-bit sort keys");
  const int end_bit = key_bits(rows, count);
  size_t sort_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortKeys(
                 nullptr, sort_bytes, static_cast<const uint64_t*>(nullptr),
                 static_cast<uint64_t*>(nullptr), static_cast<int>(count), 0, end_bit, stream),
             "index_select_backward_cuda sort size for ", count, " indices");
  const size_t keys_bytes = workspace_aligned(sizeof(uint64_t) * static_cast<size_t>(count));
  const size_t rows_bytes = workspace_aligned(sizeof(int64_t) * static_cast<size_t>(rows));
  StreamWorkspace workspace(2 * keys_bytes + 2 * rows_bytes + workspace_aligned(sort_bytes), stream,
                            "index_select_backward_cuda (", count, " indices into ", rows,
                            " rows)");
  char* base = workspace.bytes();
  uint64_t* keys = reinterpret_cast<uint64_t*>(base);
  uint64_t* sorted = reinterpret_cast<uint64_t*>(base + keys_bytes);
  int64_t* first = reinterpret_cast<int64_t*>(base + 2 * keys_bytes);
  int64_t* last = reinterpret_cast<int64_t*>(base + 2 * keys_bytes + rows_bytes);
  void* sort_storage = base + 2 * keys_bytes + 2 * rows_bytes;
  // The positions overwrite the unsorted keys, which the sort no longer needs.
  int64_t* position = reinterpret_cast<int64_t*>(keys);

  key_kernel<<<grid_for(count, kThreads), kThreads, 0, stream>>>(index, count, keys);
  CUDA_CHECK_LAUNCH("index_select_backward_cuda keys: count=", count);
  CUDA_CHECK(
      cub::DeviceRadixSort::SortKeys(sort_storage, sort_bytes, static_cast<const uint64_t*>(keys),
                                     sorted, static_cast<int>(count), 0, end_bit, stream),
      "index_select_backward_cuda sort of ", count, " indices");
  CUDA_CHECK(cudaMemsetAsync(first, 0, 2 * rows_bytes, stream),
             "index_select_backward_cuda zeroing the row segments of ", rows, " rows");
  segment_kernel<<<grid_for(count, kThreads), kThreads, 0, stream>>>(sorted, count, position, first,
                                                                     last);
  CUDA_CHECK_LAUNCH("index_select_backward_cuda segments: count=", count);
  sum_rows_kernel<<<grid_for(rows * row_size, kThreads), kThreads, 0, stream>>>(
      dy, position, first, last, rows, row_size, dx);
  CUDA_CHECK_LAUNCH("index_select_backward_cuda dx [", rows, ", ", row_size, "] count=", count);
  workspace.release("index_select_backward_cuda workspace free");
}

}  // namespace engine::kernels
