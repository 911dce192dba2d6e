// Tiled k-NN with a running top-k per query (contract and cost in knn.h).
#include "metrics/knn.h"

#include <algorithm>
#include <utility>

#include "engine/tensor.h"
#include "kernels/common/check.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/knn/knn.h"

namespace metrics {

namespace {

// (key, index): the ranking order of the whole metrics layer. std::pair's operator< is exactly
// the lexicographic order (distance first, then the smaller index).
using Candidate = std::pair<float, int64_t>;

// Offers one candidate to a max-heap holding the best (smallest) `k` seen so far.
inline void offer(std::vector<Candidate>& heap, int64_t k, Candidate c) {
  if (static_cast<int64_t>(heap.size()) < k) {
    heap.push_back(c);
    std::push_heap(heap.begin(), heap.end());
  } else if (c < heap.front()) {
    std::pop_heap(heap.begin(), heap.end());
    heap.back() = c;
    std::push_heap(heap.begin(), heap.end());
  }
}

// The GPU path: points and squared norms to the device, kernels::knn_self_cuda, results back.
KnnResult knn_self_on_cuda(const Points& points, int64_t k, const KnnOptions& options) {
  using engine::Tensor;
  const int64_t n = points.n, d = points.d;
  Tensor x = Tensor::empty({n, d}, engine::DType::F32, options.device);
  Tensor sq_norms = Tensor::empty({n}, engine::DType::F32, options.device);
  engine::kernels::cuda_memcpy_host_to_device(x.data<float>(), points.x.data(),
                                              sizeof(float) * points.x.size());
  engine::kernels::cuda_memcpy_host_to_device(sq_norms.data<float>(), points.sq_norms.data(),
                                              sizeof(float) * points.sq_norms.size());
  Tensor indices = Tensor::empty({n, k}, engine::DType::I64, options.device);
  Tensor distances = Tensor::empty({n, k}, engine::DType::F32, options.device);
  const engine::kernels::KnnKey key = points.metric == Metric::C
                                          ? engine::kernels::KnnKey::Cosine
                                          : engine::kernels::KnnKey::SquaredEuclidean;
  engine::kernels::knn_self_cuda(x.data<float>(), sq_norms.data<float>(), n, d, key, k,
                                 {options.query_block, options.gallery_block},
                                 indices.data<int64_t>(), distances.data<float>());
  KnnResult result;
  result.n = n;
  result.k = k;
  result.indices.resize(static_cast<size_t>(n * k));
  result.distances.resize(static_cast<size_t>(n * k));
  engine::kernels::cuda_memcpy_device_to_host(result.indices.data(), indices.data<int64_t>(),
                                              sizeof(int64_t) * result.indices.size());
  engine::kernels::cuda_memcpy_device_to_host(result.distances.data(), distances.data<float>(),
                                              sizeof(float) * result.distances.size());
  return result;
}

}  // namespace

KnnResult knn_self(const Points& points, int64_t k, const KnnOptions& options) {
  const int64_t n = points.n;
  ENGINE_CHECK(k >= 1, "knn: k must be >= 1, got ", k);
  ENGINE_CHECK(k <= n - 1, "knn: k = ", k, " needs at least k + 1 = ", k + 1,
               " points (the query itself is excluded), got ", n);
  ENGINE_CHECK(options.query_block >= 1 && options.gallery_block >= 1,
               "knn: block sizes must be >= 1, got query_block ", options.query_block,
               ", gallery_block ", options.gallery_block);
  if (options.device.is_cuda()) return knn_self_on_cuda(points, k, options);
  const int64_t qb = std::min(options.query_block, n);
  const int64_t gb = std::min(options.gallery_block, n);

  KnnResult result;
  result.n = n;
  result.k = k;
  result.indices.resize(static_cast<size_t>(n * k));
  result.distances.resize(static_cast<size_t>(n * k));

  const int64_t blocks = (n + qb - 1) / qb;
#pragma omp parallel
  {
    std::vector<float> tile(static_cast<size_t>(qb * gb));
    std::vector<std::vector<Candidate>> heaps(static_cast<size_t>(qb));
#pragma omp for schedule(dynamic, 1)
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t q0 = block * qb;
      const int64_t rows = std::min(qb, n - q0);
      for (auto& heap : heaps) heap.clear();
      for (int64_t g0 = 0; g0 < n; g0 += gb) {
        const int64_t cols = std::min(gb, n - g0);
        key_tile(points, q0, rows, points, g0, cols, tile.data(), gb);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t query = q0 + r;
          const float* keys = tile.data() + r * gb;
          std::vector<Candidate>& heap = heaps[r];
          for (int64_t c = 0; c < cols; ++c) {
            const int64_t item = g0 + c;
            if (item == query) continue;  // self-exclusion by index
            offer(heap, k, {keys[c], item});
          }
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<Candidate>& heap = heaps[r];
        std::sort_heap(heap.begin(), heap.end());  // ascending (key, index)
        for (int64_t j = 0; j < k; ++j) {
          result.indices[(q0 + r) * k + j] = heap[j].second;
          result.distances[(q0 + r) * k + j] = key_to_distance(points.metric, heap[j].first);
        }
      }
    }
  }
  return result;
}

}  // namespace metrics
