#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "metrics/knn.h"
#include "tests/metrics/metrics_test_util.h"

using metrics::Metric;

TEST_CASE("knn: hand-computed neighbours, self excluded by index") {
  // 1-D, metric E: x = [0, 0, 2, 5]. Item 1 duplicates item 0.
  //   q0: 1 (0), 2 (2), 3 (5)    q1: 0 (0), 2 (2), 3 (5)
  //   q2: 0 (2), 1 (2), 3 (3)    (tie at 2: smaller index first)
  //   q3: 2 (3), 0 (5), 1 (5)
  const metrics::Points points = test::points_from({0, 0, 2, 5}, 1, Metric::E);
  const metrics::KnnResult r = metrics::knn_self(points, 2);
  CHECK(r.indices == std::vector<int64_t>{1, 2, 0, 2, 0, 1, 2, 0});
  CHECK(r.distances == std::vector<float>{0, 2, 0, 2, 2, 2, 3, 5});
}

TEST_CASE("knn: tiled equals the untiled f64 reference for several block sizes") {
  // 97 integer points in 4-D (many exact ties), k = 6; 97 is not a multiple of any block.
  const int64_t n = 97, d = 4, k = 6;
  const std::vector<double> x = test::integer_points(n, d, 2, 5);
  const metrics::Points points = test::points_from(x, d, Metric::E);
  std::vector<int64_t> expected_idx;
  std::vector<float> expected_dist;
  for (int64_t q = 0; q < n; ++q) {
    const std::vector<int64_t> order = test::reference_ranking(x, n, d, q, Metric::E);
    for (int64_t j = 0; j < k; ++j) {
      expected_idx.push_back(order[j]);
      expected_dist.push_back(
          static_cast<float>(test::reference_distance(x, d, q, order[j], Metric::E)));
    }
  }
  for (int64_t qb : {1, 8, 33, 97, 256}) {
    for (int64_t gb : {1, 10, 97, 4096}) {
      INFO("query_block " << qb << ", gallery_block " << gb);
      const metrics::KnnResult r = metrics::knn_self(points, k, {qb, gb});
      CHECK(r.indices == expected_idx);
      CHECK(r.distances == expected_dist);
    }
  }
}

TEST_CASE("knn: metric N and C distances match the definitions") {
  const int64_t n = 40, d = 8;
  const std::vector<double> x = test::normal_points(n, d, 9);
  for (Metric metric : {Metric::N, Metric::C}) {
    const metrics::KnnResult r = metrics::knn_self(test::points_from(x, d, metric), 3, {16, 7});
    for (int64_t q = 0; q < n; ++q) {
      const std::vector<int64_t> order = test::reference_ranking(x, n, d, q, metric);
      for (int64_t j = 0; j < 3; ++j) {
        INFO("metric " << metrics::metric_name(metric) << " query " << q << " rank " << j);
        CHECK(r.indices[q * 3 + j] == order[j]);
        CHECK(r.distances[q * 3 + j] ==
              Approx(test::reference_distance(x, d, q, order[j], metric)).margin(1e-5));
      }
    }
  }
}

TEST_CASE("knn: bad k is reported") {
  const metrics::Points points = test::points_from({0, 1, 2}, 1, Metric::E);
  CHECK_THROWS_WITH(metrics::knn_self(points, 3), Catch::Contains("at least k + 1 = 4"));
  CHECK_THROWS_WITH(metrics::knn_self(points, 0), Catch::Contains("k must be >= 1"));
}
