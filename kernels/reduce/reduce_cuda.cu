// reduce, CUDA: sum along the middle axis of [outer, reduce, inner], and the broadcast used by
// its backward (math: reduce.h). f32 in and out, f32 accumulation in a fixed tree order.
//
// sum_axis   out[o, i] = scale * sum_{r < reduce} x[(o * reduce + r) * inner + i]
//   Two shapes of work, chosen on the host:
//   * inner == 1 (each output sums one contiguous row: sum of all, mean over the last dims):
//     sum_rows_kernel. One block per (row, split); its threads stride over the split's range
//     (coalesced), keep a private sum, then a tree: warp shuffles (5 levels), one partial per
//     warp in shared memory, a last warp-level tree over those partials.
//   * inner > 1 (each output sums a strided column: sum over dim 0 of [N, C], sum_to_shape of a
//     bias gradient): sum_columns_kernel. A block is 32 adjacent columns x 8 "depth" threads:
//     threadIdx.x picks the column (a warp reads 32 consecutive floats: coalesced), threadIdx.y
//     strides over r; the 8 partial sums of a column meet in a shared-memory tree (3 levels).
//   Splits: when the outputs alone give fewer than ~kTargetBlocks blocks and the reduction is
//     long, the reduce axis is cut into `splits` equal ranges handled by different blocks. Each
//     writes its partial to a workspace partial[s * outputs + k], and finish_splits_kernel sums
//     the splits of output k in order s = 0, 1, ... So the result never depends on block
//     scheduling: sums are deterministic (no atomics). The workspace comes from the
//     stream-ordered allocator (cudaMallocAsync / cudaFreeAsync on the current stream): no host
//     synchronization.
//   Cost: outer*reduce*inner adds; reads 4*outer*reduce*inner bytes, writes 4*outer*inner (plus
//     8*splits*outputs for the workspace). Memory bound: floor = bytes read / DRAM bandwidth.
//
// broadcast  dst[f] = scale * src[sum_d i_d(f) * strides[d]], f in row-major order of the shape
//   One thread per destination element (grid-stride): f is split into a multi-index, last dim
//   fastest. Cost: n multiplies; reads <= 4n bytes (repeated reads hit cache), writes 4n.
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/cuda_workspace.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduction.cuh"
#include "kernels/reduce/reduce.h"

namespace engine::kernels {
namespace {

constexpr int kColumns = 32;   // sum_columns_kernel: columns per block (threadIdx.x)
constexpr int kDepth = 8;      // sum_columns_kernel: threads along r per column (.y)
constexpr int kThreads = 256;  // 1-D elementwise kernels
// Enough blocks to keep every SM of a current GPU (132 on H100) busy several times over.
constexpr int64_t kTargetBlocks = 1024;
// Only split a reduction if each split still has this many elements per thread (splitting
// shorter ones costs more in the second pass than it saves).
constexpr int64_t kMinPerThread = 16;

// Work item w = (row o, split s) with o = w / splits, s = w % splits; the split covers
// r in [s * chunk, min((s + 1) * chunk, reduce)). Output: dst[s * outer + o] = scale * sum (with
// splits == 1, dst is `out` and this is out[o]).
__global__ void sum_rows_kernel(const float* x, int64_t outer, int64_t reduce, int64_t splits,
                                int64_t chunk, float scale, float* dst) {
  __shared__ float scratch[kWarpSize];
  for (int64_t w = blockIdx.x; w < outer * splits; w += gridDim.x) {
    const int64_t o = w / splits, s = w % splits;
    const int64_t begin = s * chunk;
    const int64_t end = begin + chunk < reduce ? begin + chunk : reduce;
    const float* row = x + o * reduce;
    float acc = 0.0f;
    for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x) acc += row[r];
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) dst[s * outer + o] = scale * acc;
  }
}

// Work item w = (row o, column tile t, split s): s = w % splits, t = (w / splits) % tiles,
// o = w / (splits * tiles), tiles = ceil(inner / 32). Thread (tx, ty) sums column
// i = t * 32 + tx over r = begin + ty, begin + ty + 8, ... < end; the 8 sums of a column are
// added in shared memory (tree 8 -> 4 -> 2 -> 1). Output: dst[s * outer * inner + o * inner + i].
__global__ void sum_columns_kernel(const float* x, int64_t outer, int64_t reduce, int64_t inner,
                                   int64_t splits, int64_t chunk, float scale, float* dst) {
  __shared__ float partial[kDepth][kColumns + 1];  // +1: columns of a row fall in distinct banks
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t tiles = (inner + kColumns - 1) / kColumns;
  for (int64_t w = blockIdx.x; w < outer * tiles * splits; w += gridDim.x) {
    const int64_t s = w % splits;
    const int64_t t = (w / splits) % tiles;
    const int64_t o = w / (splits * tiles);
    const int64_t i = t * kColumns + tx;
    const int64_t begin = s * chunk;
    const int64_t end = begin + chunk < reduce ? begin + chunk : reduce;
    float acc = 0.0f;
    if (i < inner) {
      for (int64_t r = begin + ty; r < end; r += kDepth) acc += x[(o * reduce + r) * inner + i];
    }
    partial[ty][tx] = acc;
    __syncthreads();
    for (int half = kDepth / 2; half > 0; half /= 2) {
      if (ty < half) partial[ty][tx] += partial[ty + half][tx];
      __syncthreads();
    }
    if (ty == 0 && i < inner) dst[s * outer * inner + o * inner + i] = scale * partial[0][tx];
    __syncthreads();  // partial[0][*] is read above before the next item overwrites it
  }
}

// out[k] = scale * sum_{s < splits} partial[s * outputs + k], s in increasing order.
__global__ void finish_splits_kernel(const float* partial, int64_t outputs, int64_t splits,
                                     float scale, float* out) {
  for (int64_t k = grid_thread_index(); k < outputs; k += grid_thread_count()) {
    float acc = 0.0f;
    for (int64_t s = 0; s < splits; ++s) acc += partial[s * outputs + k];
    out[k] = scale * acc;
  }
}

__global__ void broadcast_kernel(const float* src, StridedLayout layout, float scale, float* dst,
                                 int64_t total) {
  for (int64_t flat = grid_thread_index(); flat < total; flat += grid_thread_count()) {
    int64_t rest = flat, offset = 0;
    for (int d = layout.ndim - 1; d >= 0; --d) {
      const int64_t i = rest % layout.shape[d];
      rest /= layout.shape[d];
      offset += i * layout.strides[d];
    }
    dst[flat] = scale * src[offset];
  }
}

// How many ranges to cut a reduction of `length` into, given `items` blocks without splitting
// and `threads` threads working on each range.
int64_t choose_splits(int64_t items, int64_t length, int64_t threads) {
  if (items >= kTargetBlocks) return 1;
  const int64_t wanted = ceil_div(kTargetBlocks, items);
  const int64_t affordable = length / (kMinPerThread * threads);
  const int64_t splits = wanted < affordable ? wanted : affordable;
  return splits < 1 ? 1 : splits;
}

}  // namespace

void sum_axis_cuda(const float* x, int64_t outer, int64_t reduce, int64_t inner, float scale,
                   float* out) {
  const int64_t outputs = outer * inner;
  if (outputs == 0) return;
  cudaStream_t stream = current_stream();

  const bool rows = inner == 1;
  const int row_threads = row_block_threads(reduce);
  const int64_t items = rows ? outer : outer * ceil_div(inner, kColumns);
  int64_t splits = choose_splits(items, reduce, rows ? row_threads : kDepth);
  int64_t chunk = reduce;
  if (splits > 1) {
    chunk = ceil_div(reduce, splits);
    splits = ceil_div(reduce, chunk);  // no empty trailing split
  }

  // Partial sums of the splits (none without splits).
  const std::size_t workspace_bytes =
      splits > 1 ? static_cast<std::size_t>(splits * outputs) * sizeof(float) : 0;
  StreamWorkspace workspace_memory(workspace_bytes, stream, "sum_axis_cuda");
  float* workspace = reinterpret_cast<float*>(workspace_memory.bytes());
  float* dst = splits > 1 ? workspace : out;
  const float first_scale = splits > 1 ? 1.0f : scale;  // with splits, scale is applied at the end

  if (rows) {
    sum_rows_kernel<<<grid_for_items(items * splits), row_threads, 0, stream>>>(
        x, outer, reduce, splits, chunk, first_scale, dst);
  } else {
    sum_columns_kernel<<<grid_for_items(items * splits), dim3(kColumns, kDepth), 0, stream>>>(
        x, outer, reduce, inner, splits, chunk, first_scale, dst);
  }
  CUDA_CHECK_LAUNCH("sum_axis_cuda [outer, reduce, inner] = [", outer, ", ", reduce, ", ", inner,
                    "] splits=", splits);
  if (splits > 1) {
    finish_splits_kernel<<<grid_for(outputs, kThreads), kThreads, 0, stream>>>(workspace, outputs,
                                                                               splits, scale, out);
    CUDA_CHECK_LAUNCH("sum_axis_cuda finish [outer, reduce, inner] = [", outer, ", ", reduce, ", ",
                      inner, "] splits=", splits);
    workspace_memory.release("sum_axis_cuda workspace free");
  }
}

void broadcast_cuda(const float* src, StridedLayout layout, float scale, float* dst) {
  int64_t total = 1;
  for (int d = 0; d < layout.ndim; ++d) total *= layout.shape[d];
  if (total == 0) return;
  broadcast_kernel<<<grid_for(total, kThreads), kThreads, 0, current_stream()>>>(src, layout, scale,
                                                                                 dst, total);
  CUDA_CHECK_LAUNCH("broadcast_cuda n=", total, " dims=", layout.ndim);
}

}  // namespace engine::kernels
