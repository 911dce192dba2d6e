// k nearest neighbours, CPU twin: the oracle of knn_self_cuda (contract, math and cost in knn.h).
// Plain: for each query, the key of every other item (dot product summed in f64, the key formed in
// f64 and rounded to f32, the key's type), then the k smallest (key, index) pairs.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "kernels/common/check.h"
#include "kernels/knn/knn.h"

namespace engine::kernels {

namespace {

float key_of(const float* points, const float* sq_norms, int64_t d, KnnKey key, int64_t i,
             int64_t j) {
  double dot = 0.0;
  for (int64_t c = 0; c < d; ++c) dot += double(points[i * d + c]) * double(points[j * d + c]);
  if (key == KnnKey::Cosine) return static_cast<float>(1.0 - dot);
  const double squared = double(sq_norms[i]) + double(sq_norms[j]) - 2.0 * dot;
  return static_cast<float>(std::max(squared, 0.0));
}

}  // namespace

void check_knn_self_args(const char* name, int64_t n, int64_t d, int64_t k,
                         const KnnTiling& tiling) {
  ENGINE_CHECK(d >= 1 && k >= 1 && k <= n - 1, name, ": points [", n, ", ", d, "] with k = ", k,
               ": need d >= 1 and 1 <= k <= n - 1 (the query itself is excluded)");
  ENGINE_CHECK(tiling.query_block >= 1 && tiling.gallery_block >= 1, name,
               ": block sizes must be >= 1, got query_block ", tiling.query_block,
               ", gallery_block ", tiling.gallery_block);
}

void knn_self_cpu(const float* points, const float* sq_norms, int64_t n, int64_t d, KnnKey key,
                  int64_t k, const KnnTiling& tiling, int64_t* indices, float* distances) {
  check_knn_self_args("knn_self_cpu", n, d, k, tiling);
  std::vector<std::pair<float, int64_t>> row;
  for (int64_t i = 0; i < n; ++i) {
    row.clear();
    for (int64_t j = 0; j < n; ++j) {
      if (j != i) row.emplace_back(key_of(points, sq_norms, d, key, i, j), j);
    }
    // pair's operator< is the (key, index) order.
    std::partial_sort(row.begin(), row.begin() + k, row.end());
    for (int64_t r = 0; r < k; ++r) {
      indices[i * k + r] = row[r].second;
      const float value = row[r].first;
      distances[i * k + r] = key == KnnKey::Cosine ? value : std::sqrt(value);
    }
  }
}

}  // namespace engine::kernels
