// k nearest neighbours within one set, CUDA, f32 (contract and math in knn.h; the oracle is
// knn_self_cpu). Tiled: never an n x n matrix.
//
// Math: key(i, j) = max(s_i + s_j - 2 <p_i, p_j>, 0) (SquaredEuclidean) or 1 - <p_i, p_j>
//   (Cosine); per query the k smallest (key, j), j != i, nearest first; distance = sqrt(key)
//   or key.
// Layout: points [n, d], sq_norms [n] f32; indices [n, k] i64, distances [n, k] f32 row-major.
//   While searching, distances holds the keys of each query's running top-k (sorted ascending by
//   (key, index), indices beside them) and a workspace counter per query holds its length; a
//   last pass turns keys into distances in place.
// Parallelization, per (query block of qb rows) x (gallery chunk of gb columns), in stream order:
//   1. the dot tile [rows, cols] = P[q0 : q0 + rows] P[g0 : g0 + cols]^T by cuBLAS SGEMM
//      (matmul_cublas: strict FP32, no TF32), into one qb x gb workspace reused by every tile;
//   2. merge_tile_kernel: one warp per query row of the tile (8 rows per 256-thread block). The
//      warp walks the row 32 columns at a time, forms the keys, and ballots the candidates that
//      beat the query's current k-th (key, index) (all of them while fewer than k are kept).
//      Each such candidate, in column order, is inserted into the sorted top-k: its position is
//      a warp count of the kept entries below it (then __syncwarp, so that no lane writes the
//      list while another may still read it), then the entries after it move up one (the
//      lanes move 32 at a time, the highest chunk first, __syncwarp between reading and writing),
//      dropping the last when full. On random orders a query sees about k (1 + ln(n / k))
//      insertions in all, so after the first chunk almost every key costs one comparison.
//   The top-k lives in the outputs (global memory, L1/L2 resident while its warp works on it).
// Cost: 2 n^2 d FLOPs in the GEMMs (the floor: n = 100k, d = 512 is 1e13 FLOPs, ~0.2 s at cuBLAS
//   SGEMM rates); the merge reads the n^2 dot products once (4 n^2 bytes through L2, written by the
//   GEMM just before: 40 GB for n = 100k, ~15 ms at HBM bandwidth) and does O(n^2) comparisons.
//   Memory: 4 qb gb bytes (the tile) + 12 n k (outputs) + 4 n (counters).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/cuda_workspace.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduction.cuh"
#include "kernels/knn/knn.h"
#include "kernels/matmul/matmul.h"

namespace engine::kernels {
namespace {

constexpr int kMergeThreads = 256;
constexpr int kRowsPerMergeBlock = kMergeThreads / kWarpSize;
constexpr int kFinishThreads = 256;

// The (key, index) order of the whole metrics layer: distance first, the smaller index on ties.
__device__ inline bool precedes(float key_a, int64_t index_a, float key_b, int64_t index_b) {
  return key_a < key_b || (key_a == key_b && index_a < index_b);
}

// Inserts (key, index) into the warp's sorted list keys/indices of `size` entries (at most
// `capacity`), dropping the last entry when the list is full. Called by all 32 lanes with the
// same arguments; returns the new size.
__device__ inline int insert_sorted(float* keys, int64_t* indices, int size, int capacity,
                                    float key, int64_t index) {
  const int lane = threadIdx.x % kWarpSize;
  int below = 0;
  for (int e = lane; e < size; e += kWarpSize) below += precedes(keys[e], indices[e], key, index);
  const int position = warp_sum(below);
  // Every lane's reads of the list (the count above, and the caller's reads of the k-th entry
  // since the last insertion) before any lane writes it: shuffles order no memory, only
  // __syncwarp does (found by the emulator's race checker,
  // tests/support/cuda_emulator/racecheck.h).
  __syncwarp();
  const int new_size = size < capacity ? size + 1 : capacity;
  // Move entries [position, new_size - 2] to [position + 1, new_size - 1], 32 at a time from the
  // top: a chunk writes only slots its own lanes or the chunk above have already read.
  for (int top = new_size - 2; top >= position; top -= kWarpSize) {
    const int e = top - lane;
    const bool moves = e >= position;
    float moved_key = 0.0f;
    int64_t moved_index = 0;
    if (moves) {
      moved_key = keys[e];
      moved_index = indices[e];
    }
    __syncwarp();
    if (moves) {
      keys[e + 1] = moved_key;
      indices[e + 1] = moved_index;
    }
    __syncwarp();
  }
  if (lane == 0) {
    keys[position] = key;
    indices[position] = index;
  }
  __syncwarp();
  return new_size;
}

__global__ void __launch_bounds__(kMergeThreads)
    merge_tile_kernel(const float* dots, int64_t cols, int64_t q0, int64_t rows, int64_t g0,
                      const float* sq_norms, KnnKey key_kind, int k, int* kept, int64_t* indices,
                      float* keys_out) {
  const int64_t r = int64_t(blockIdx.x) * kRowsPerMergeBlock + threadIdx.x / kWarpSize;
  if (r >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x % kWarpSize;
  const int64_t query = q0 + r;
  const float* row = dots + r * cols;
  float* keys = keys_out + query * k;
  int64_t* best = indices + query * k;
  const float sq_query = sq_norms[query];
  int size = kept[query];
  // The k-th entry: a candidate must precede it once the list is full.
  float worst_key = size == k ? keys[k - 1] : 0.0f;
  int64_t worst_index = size == k ? best[k - 1] : 0;

  for (int64_t c0 = 0; c0 < cols; c0 += kWarpSize) {
    const int64_t c = c0 + lane;
    const int64_t item = g0 + c;
    float key = 0.0f;
    bool candidate = false;
    if (c < cols && item != query) {  // self excluded by index
      const float dot = row[c];
      key = key_kind == KnnKey::Cosine ? 1.0f - dot
                                       : fmaxf(fmaf(-2.0f, dot, sq_query + sq_norms[item]), 0.0f);
      candidate = size < k || precedes(key, item, worst_key, worst_index);
    }
    unsigned pending = __ballot_sync(kFullWarpMask, candidate);
    while (pending != 0) {  // in column order; every lane sees the same candidate
      const int source = __ffs(pending) - 1;
      pending &= pending - 1;
      const float candidate_key = __shfl_sync(kFullWarpMask, key, source);
      const int64_t candidate_item = g0 + c0 + source;
      // The k-th may have improved since the ballot.
      if (size == k && !precedes(candidate_key, candidate_item, worst_key, worst_index)) continue;
      size = insert_sorted(keys, best, size, k, candidate_key, candidate_item);
      if (size == k) {
        worst_key = keys[k - 1];
        worst_index = best[k - 1];
      }
    }
  }
  __syncwarp();  // every lane has read kept[query] (above) before lane 0 writes it
  if (lane == 0) kept[query] = size;
}

// Keys of the finished top-k lists -> distances, in place.
__global__ void keys_to_distances_kernel(float* values, int64_t count) {
  for (int64_t e = grid_thread_index(); e < count; e += grid_thread_count()) {
    values[e] = sqrtf(values[e]);
  }
}

}  // namespace

void knn_self_cuda(const float* points, const float* sq_norms, int64_t n, int64_t d, KnnKey key,
                   int64_t k, const KnnTiling& tiling, int64_t* indices, float* distances) {
  check_knn_self_args("knn_self_cuda", n, d, k, tiling);
  ENGINE_CHECK(k <= INT32_MAX, "knn_self_cuda: k = ", k, " is too large");
  const int64_t qb = tiling.query_block < n ? tiling.query_block : n;
  const int64_t gb = tiling.gallery_block < n ? tiling.gallery_block : n;
  cudaStream_t stream = current_stream();

  const size_t tile_bytes = sizeof(float) * static_cast<size_t>(qb * gb);
  const size_t kept_bytes = sizeof(int) * static_cast<size_t>(n);
  StreamWorkspace workspace(tile_bytes + kept_bytes, stream, "knn_self_cuda (query_block ", qb,
                            ", gallery_block ", gb, ", n ", n, ")");
  float* tile = reinterpret_cast<float*>(workspace.bytes());
  int* kept =
      reinterpret_cast<int*>(workspace.bytes() + tile_bytes);  // tile_bytes is a multiple of 4
  CUDA_CHECK(cudaMemsetAsync(kept, 0, kept_bytes, stream), "knn_self_cuda counters");

  for (int64_t q0 = 0; q0 < n; q0 += qb) {
    const int64_t rows = n - q0 < qb ? n - q0 : qb;
    for (int64_t g0 = 0; g0 < n; g0 += gb) {
      const int64_t cols = n - g0 < gb ? n - g0 : gb;
      matmul_cublas(rows, cols, d, points + q0 * d, points + g0 * d, false, true, tile, false);
      merge_tile_kernel<<<static_cast<unsigned>(ceil_div(rows, kRowsPerMergeBlock)), kMergeThreads,
                          0, stream>>>(tile, cols, q0, rows, g0, sq_norms, key, static_cast<int>(k),
                                       kept, indices, distances);
      CUDA_CHECK_LAUNCH("knn_self_cuda merge: queries [", q0, ", ", q0 + rows, ") x gallery [", g0,
                        ", ", g0 + cols, "), k = ", k);
    }
  }
  if (key == KnnKey::SquaredEuclidean) {
    keys_to_distances_kernel<<<grid_for(n * k, kFinishThreads), kFinishThreads, 0, stream>>>(
        distances, n * k);
    CUDA_CHECK_LAUNCH("knn_self_cuda distances n = ", n, ", k = ", k);
  }
  workspace.release("knn_self_cuda workspace free");
}

}  // namespace engine::kernels
