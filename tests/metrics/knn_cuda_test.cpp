// The k-NN kernels (kernels/knn): the CPU twin against metrics::knn_self (exactly on integer
// points, where every key is an exact small integer and ties abound; up to rounding on random
// points), and [cuda] the tiled GPU search against the twin, directly and through
// metrics::knn_self with a CUDA device.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"
#include "kernels/knn/knn.h"
#include "metrics/knn.h"
#include "tests/metrics/metrics_test_util.h"
#include "tests/support/cuda_guard.h"

using engine::kernels::KnnKey;
using engine::kernels::KnnTiling;
using metrics::Metric;

namespace {

KnnKey key_for(Metric metric) {
  return metric == Metric::C ? KnnKey::Cosine : KnnKey::SquaredEuclidean;
}

metrics::KnnResult twin(const metrics::Points& points, int64_t k) {
  metrics::KnnResult r;
  r.n = points.n;
  r.k = k;
  r.indices.resize(static_cast<size_t>(points.n * k));
  r.distances.resize(static_cast<size_t>(points.n * k));
  engine::kernels::knn_self_cpu(points.x.data(), points.sq_norms.data(), points.n, points.d,
                                key_for(points.metric), k, KnnTiling{}, r.indices.data(),
                                r.distances.data());
  return r;
}

// The GPU kernel on device copies of the prepared points.
metrics::KnnResult on_cuda(const metrics::Points& points, int64_t k, const KnnTiling& tiling) {
  using engine::Tensor;
  const engine::Device cuda = engine::Device::cuda();
  std::vector<double> x(points.x.begin(), points.x.end());
  std::vector<double> sq(points.sq_norms.begin(), points.sq_norms.end());
  const Tensor dx = Tensor::from_vector(x, {points.n, points.d}, engine::DType::F32, cuda);
  const Tensor dsq = Tensor::from_vector(sq, {points.n}, engine::DType::F32, cuda);
  Tensor indices = Tensor::empty({points.n, k}, engine::DType::I64, cuda);
  Tensor distances = Tensor::empty({points.n, k}, engine::DType::F32, cuda);
  engine::kernels::knn_self_cuda(dx.data<float>(), dsq.data<float>(), points.n, points.d,
                                 key_for(points.metric), k, tiling, indices.data<int64_t>(),
                                 distances.data<float>());
  metrics::KnnResult r;
  r.n = points.n;
  r.k = k;
  r.indices = indices.to_indices();
  for (double v : distances.to_vector()) r.distances.push_back(static_cast<float>(v));
  return r;
}

// Agreement up to rounding of the keys: at every rank the distances agree within `tol`, and where
// the two lists put different items, the f64 reference distances of those items from the query
// agree within 2 tol (a near tie swapped). Each list holds k distinct items other than the query.
void require_same_up_to_rounding(const metrics::KnnResult& got, const metrics::KnnResult& expected,
                                 const std::vector<double>& x, int64_t d, Metric metric,
                                 double tol) {
  REQUIRE(got.indices.size() == expected.indices.size());
  REQUIRE(got.distances.size() == expected.distances.size());
  const int64_t n = expected.n, k = expected.k;
  int64_t bad = 0, swaps = 0;
  for (int64_t q = 0; q < n; ++q) {
    std::set<int64_t> seen;
    for (int64_t r = 0; r < k; ++r) {
      const size_t e = static_cast<size_t>(q * k + r);
      const int64_t gi = got.indices[e], ei = expected.indices[e];
      bool ok = gi >= 0 && gi < n && gi != q && seen.insert(gi).second;
      ok = ok && std::fabs(double(got.distances[e]) - double(expected.distances[e])) <= tol;
      if (ok && gi != ei) {
        ++swaps;
        ok = std::fabs(test::reference_distance(x, d, q, gi, metric) -
                       test::reference_distance(x, d, q, ei, metric)) <= 2 * tol;
      }
      if (!ok && bad++ == 0) {
        UNSCOPED_INFO("first disagreement: query " << q << " rank " << r << ": got " << gi << " ("
                                                   << got.distances[e] << "), expected " << ei
                                                   << " (" << expected.distances[e] << ")");
      }
    }
  }
  UNSCOPED_INFO(swaps << " near-tie swaps");
  CHECK(bad == 0);
}

// 97 integer points in 4-D plus exact duplicates of some of them (rows 97..106 copy rows
// 0, 10, ..., 90): keys are small exact integers in f32 and f64, so every path must agree exactly,
// ties (and duplicates at distance 0) broken by the smaller index.
std::vector<double> integer_points_with_duplicates(int64_t d) {
  std::vector<double> x = test::integer_points(97, d, 2, 5);
  for (int64_t source = 0; source < 97; source += 10) {
    for (int64_t c = 0; c < d; ++c) x.push_back(x[static_cast<size_t>(source * d + c)]);
  }
  return x;
}

}  // namespace

TEST_CASE("knn twin: equals knn_self exactly on integer points with ties and duplicates",
          "[metrics][knn]") {
  const int64_t d = 4;
  const std::vector<double> x = integer_points_with_duplicates(d);
  const metrics::Points points = test::points_from(x, d, Metric::E);
  for (int64_t k : {1, 4, 30}) {
    INFO("k " << k);
    const metrics::KnnResult expected = metrics::knn_self(points, k, {16, 33});
    const metrics::KnnResult got = twin(points, k);
    CHECK(got.indices == expected.indices);
    CHECK(got.distances == expected.distances);
  }
}

TEST_CASE("knn twin: matches knn_self on random points up to rounding (metrics N, E, C)",
          "[metrics][knn]") {
  const int64_t n = 301, d = 16;
  const std::vector<double> x = test::normal_points(n, d, 12);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    const metrics::Points points = test::points_from(x, d, metric);
    for (int64_t k : {1, 4, 30}) {
      INFO("metric " << metrics::metric_name(metric) << " k " << k);
      // Keys of magnitude ~|x|^2 (~16 for E) in f32 GEMMs: ~1e-5 absolute on the key, less on
      // the distance away from 0; 1e-4 still rejects any neighbour more than that farther.
      require_same_up_to_rounding(twin(points, k), metrics::knn_self(points, k), x, d, metric,
                                  1e-4);
    }
  }
}

TEST_CASE("knn twin: bad k is reported", "[metrics][knn]") {
  const metrics::Points points = test::points_from({0, 1, 2}, 1, Metric::E);
  std::vector<int64_t> indices(9);
  std::vector<float> distances(9);
  CHECK_THROWS_WITH(engine::kernels::knn_self_cpu(points.x.data(), points.sq_norms.data(), 3, 1,
                                                  KnnKey::SquaredEuclidean, 3, KnnTiling{},
                                                  indices.data(), distances.data()),
                    Catch::Contains("knn_self_cpu") && Catch::Contains("1 <= k <= n - 1"));
}

// [heavy]: racecheck and initcheck skip it (tools/gpu_check.sh); memcheck and ctest run it.
TEST_CASE("knn cuda: equals the twin exactly on integer points, several sizes and tilings",
          "[metrics][knn][cuda][heavy]") {
  REQUIRE_CUDA_OR_SKIP();
  const int64_t d = 4;
  for (int64_t extra : {0, 200, 900}) {  // n = 107, 307, 1007: odd, not multiples of any tile
    std::vector<double> x = integer_points_with_duplicates(d);
    if (extra > 0) {
      const std::vector<double> more = test::integer_points(extra, d, 2, 6);
      x.insert(x.end(), more.begin(), more.end());
    }
    const metrics::Points points = test::points_from(x, d, Metric::E);
    for (int64_t k : {1, 4, 30}) {
      const metrics::KnnResult expected = twin(points, k);
      for (const KnnTiling tiling : {KnnTiling{}, KnnTiling{7, 50}, KnnTiling{33, 100}}) {
        INFO("n " << points.n << " k " << k << " query_block " << tiling.query_block
                  << " gallery_block " << tiling.gallery_block);
        const metrics::KnnResult got = on_cuda(points, k, tiling);
        CHECK(got.indices == expected.indices);
        CHECK(got.distances == expected.distances);
      }
    }
  }
}

TEST_CASE("knn cuda: matches the twin on random points up to rounding (metrics N, E, C)",
          "[metrics][knn][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  for (int64_t n : {3, 129, 1001}) {
    const int64_t d = 33;
    const std::vector<double> x = test::normal_points(n, d, 13 + n);
    for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
      const metrics::Points points = test::points_from(x, d, metric);
      for (int64_t k : {1, 4, 30}) {
        if (k > n - 1) continue;
        INFO("n " << n << " metric " << metrics::metric_name(metric) << " k " << k);
        // As for the CPU paths: f32 keys from differently ordered sums.
        require_same_up_to_rounding(on_cuda(points, k, {64, 500}), twin(points, k), x, d, metric,
                                    1e-4);
      }
    }
  }
}

TEST_CASE("knn cuda: knn_self with a CUDA device equals the CPU path on integer points",
          "[metrics][knn][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const int64_t d = 4;
  const metrics::Points points = test::points_from(integer_points_with_duplicates(d), d, Metric::E);
  for (int64_t k : {1, 4, 30}) {
    INFO("k " << k);
    const metrics::KnnResult cpu = metrics::knn_self(points, k, {16, 33});
    const metrics::KnnResult gpu = metrics::knn_self(points, k, {16, 33, engine::Device::cuda()});
    CHECK(gpu.indices == cpu.indices);
    CHECK(gpu.distances == cpu.distances);
  }
}
