// k nearest neighbours within one set of prepared points (metrics/knn.h's contract), as a
// kernel: a CPU twin (the oracle) and a tiled CUDA version.
//
// Math: points p_0..p_{n-1} in R^d (rows already prepared by metrics::make_points: L2-normalized
//   for N and C) with cached squared norms s_i = |p_i|^2 (f32). The ranking key of (i, j):
//     SquaredEuclidean (metrics N, E):  key = max(s_i + s_j - 2 <p_i, p_j>, 0)
//     Cosine (metric C):                key = 1 - <p_i, p_j>
//   (metrics/distance.h). For every query i, the k items j != i (self excluded BY INDEX) with the
//   smallest (key, j) in lexicographic order -- a smaller index wins an exact tie -- nearest
//   first; distance = sqrt(key) for SquaredEuclidean, key for Cosine.
// Layout: points [n, d] row-major f32, sq_norms [n] f32; indices [n, k] i64 and distances [n, k]
//   f32, row-major.
// Tiling (CUDA; the CPU twin ranks each query's full row and ignores it): queries in blocks of
//   query_block rows, the gallery in chunks of gallery_block columns; one key tile at a time,
//   merged into each query's running top-k. Memory: query_block x gallery_block floats + the
//   n x k outputs + n counters: never n x n.
// Cost: 2 n^2 d FLOPs for the dot products (the floor; f32 GEMM), O(n^2) comparisons, and
//   O(k) work per insertion into a top-k, of which a query sees about k (1 + ln(n / k)) on
//   random orders.
#pragma once

#include <cstdint>

namespace engine::kernels {

enum class KnnKey { SquaredEuclidean, Cosine };

struct KnnTiling {
  int64_t query_block = 256;
  int64_t gallery_block = 4096;
};

// The rules on the arguments of both implementations: d >= 1, 1 <= k <= n - 1 and block sizes
// >= 1; engine::Error otherwise, its message starting with `name` (the caller's).
void check_knn_self_args(const char* name, int64_t n, int64_t d, int64_t k,
                         const KnnTiling& tiling);

// Requires check_knn_self_args's rules. Host pointers.
void knn_self_cpu(const float* points, const float* sq_norms, int64_t n, int64_t d, KnnKey key,
                  int64_t k, const KnnTiling& tiling, int64_t* indices, float* distances);

// Device pointers, current stream; no host synchronization (knn_cuda.cu).
void knn_self_cuda(const float* points, const float* sq_norms, int64_t n, int64_t d, KnnKey key,
                   int64_t k, const KnnTiling& tiling, int64_t* indices, float* distances);

}  // namespace engine::kernels
