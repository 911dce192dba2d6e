// index_select: gather rows of x by an index vector, and the scatter-add that is its gradient.
//
// Math:    forward   out[i, :] = x[index[i], :]                for i < count
//          backward  dx[r, :] = sum_{i : index[i] = r} dy[i, :]  (repeated indices accumulate)
// Layout:  x is viewed as `rows` contiguous rows of `row_size` elements (dim 0 of any-rank x;
//          row_size is the product of the other dims); out and dy are [count, row_size];
//          index holds `count` int64 row numbers.
// Parallelization: plain loops.
// Work:    no FLOPs forward (count * row_size elements moved); backward count * row_size adds.
#pragma once

#include <cstdint>

namespace engine::kernels {

// Throws engine::Error naming index_select when an index is outside [0, rows).
template <typename T>
void index_select_forward_cpu(const T* x, int64_t rows, int64_t row_size, const int64_t* index,
                              int64_t count, T* out);

// Overwrites dx [rows, row_size] with the scatter-added rows of dy [count, row_size]. The
// indices are assumed valid (the forward checked them).
template <typename T>
void index_select_backward_cpu(const T* dy, const int64_t* index, int64_t count, int64_t rows,
                               int64_t row_size, T* dx);

// CUDA twins (device pointers; index_select_cuda.cu). The forward exists for f32 and i64 (labels
// are gathered with the same index as their embeddings).
// The index lives on the device, so it is checked inside the kernel, not on the host (that would
// need a device->host copy, i.e. a sync): an index outside [0, rows) makes the kernel print
//   "index_select_cuda: index R (at position I) is out of range for dimension 0 of size ROWS"
// and __trap(); the error surfaces at the next synchronizing CUDA call as an engine::Error
// ("unspecified launch failure") and the CUDA context is unusable from then on.
void index_select_forward_cuda(const float* x, int64_t rows, int64_t row_size, const int64_t* index,
                               int64_t count, float* out);
void index_select_forward_cuda(const int64_t* x, int64_t rows, int64_t row_size,
                               const int64_t* index, int64_t count, int64_t* out);
// The backward adds each row's contributions in ascending position starting from 0, like the
// CPU reference, so it gives the CPU's bits and the same bits on every run (no atomicAdd: its
// order of addition would vary from run to run). It takes a workspace of about 16 bytes per index
// and 16 per row, plus CUB's sort storage, from the stream-ordered allocator; at most 2^31 - 1
// indices.
void index_select_backward_cuda(const float* dy, const int64_t* index, int64_t count, int64_t rows,
                                int64_t row_size, float* dx);

}  // namespace engine::kernels
