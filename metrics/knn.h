// Tiled k-nearest-neighbour search within one set (query set = gallery = the set,
// docs/architecture.md).
//
// For every query i, the k gallery items j != i with the smallest (key(i, j), j) in lexicographic
// order: the distance ranks, the smaller index wins an exact tie. The query's own row is excluded
// BY INDEX, never by distance: a duplicate of the query (distance 0) is its first neighbour.
//
// Tiling: queries in blocks of `query_block` rows, the gallery in chunks of `gallery_block`
// columns; one tile of keys (query_block x gallery_block floats, one GEMM, distance.h) at a time
// per thread, merged into a running top-k per query (a bounded max-heap on (key, index), so an
// item worse than the current k-th costs one comparison). Memory: O(threads * query_block *
// gallery_block + N k) — never an N x N matrix.
//
// Cost: N^2 d multiply-adds for the keys (the floor: 2 N^2 d FLOPs), plus O(N^2) comparisons and
// O(N k log k) heap work for items that enter a top-k. Parallelization: OpenMP over query blocks.
//
// With options.device a CUDA device, the same search runs on the GPU (kernels/knn/knn_cuda.cu:
// cuBLAS key tiles of query_block x gallery_block and a per-query running top-k in device memory;
// the points are copied to the device and the result back). Same contract; the keys come from
// another f32 GEMM, so two items whose keys differ by a rounding error may swap places.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/device.h"
#include "metrics/distance.h"

namespace metrics {

struct KnnOptions {
  int64_t query_block = 256;
  int64_t gallery_block = 4096;
  engine::Device device = engine::Device::cpu();  // CPU: the OpenMP path below (the default)
};

struct KnnResult {
  int64_t n = 0;
  int64_t k = 0;
  std::vector<int64_t> indices;  // n * k, row-major, nearest first
  std::vector<float> distances;  // n * k, the metric's distance (not the key)
};

// Requires 1 <= k <= n - 1 (an engine::Error says which bound failed).
KnnResult knn_self(const Points& points, int64_t k, const KnnOptions& options = {});

}  // namespace metrics
