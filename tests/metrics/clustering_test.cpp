#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <vector>

#include "metrics/clustering.h"
#include "tests/metrics/metrics_test_util.h"

using metrics::Metric;

TEST_CASE("nmi: hand-computed contingency table") {
  // labels [0,0,1,1], clusters [0,0,0,1]: a = (2, 2), b = (3, 1), cells n00 = 2, n10 = 1, n11 = 1.
  //   MI   = 2/4 ln(4*2/(2*3)) + 1/4 ln(4*1/(2*3)) + 1/4 ln(4*1/(2*1))
  //        = 0.5 ln(4/3) + 0.25 ln(2/3) + 0.25 ln 2 = 0.2157615543388357
  //   H(U) = ln 2 = 0.6931471805599453
  //   H(V) = -(3/4 ln 3/4 + 1/4 ln 1/4) = 0.5623351446188083
  //   NMI  = MI / ((H(U) + H(V)) / 2) = 0.3437110184854508
  CHECK(metrics::normalized_mutual_info({0, 0, 1, 1}, {0, 0, 0, 1}) ==
        Approx(0.3437110184854508).epsilon(1e-12));
  // Symmetric in its arguments (arithmetic mean normalization).
  CHECK(metrics::normalized_mutual_info({0, 0, 0, 1}, {0, 0, 1, 1}) ==
        Approx(0.3437110184854508).epsilon(1e-12));
}

TEST_CASE("nmi: limit cases") {
  // A relabeling of the same partition: MI = H(U) = H(V) = ln 2 -> 1.
  CHECK(metrics::normalized_mutual_info({5, 5, 9, 9}, {1, 1, 0, 0}) == Approx(1.0).epsilon(1e-12));
  // Independent partitions: every cell n_uv = 1 = a_u b_v / N -> MI = 0.
  CHECK(metrics::normalized_mutual_info({0, 0, 1, 1}, {0, 1, 0, 1}) == 0.0);
  // One class and one cluster, and the empty set: 1 (scikit-learn's convention).
  CHECK(metrics::normalized_mutual_info({3, 3, 3}, {0, 0, 0}) == 1.0);
  CHECK(metrics::normalized_mutual_info({}, {}) == 1.0);
  // One class, two clusters: MI = 0 -> 0.
  CHECK(metrics::normalized_mutual_info({3, 3, 3}, {0, 1, 1}) == 0.0);
  CHECK_THROWS_WITH(metrics::normalized_mutual_info({0, 1}, {0}), Catch::Contains("2 labels"));
}

namespace {

// `classes` blobs of `per_class` points each in d dims: class c sits at 10 * e_c, with noise of
// standard deviation 0.05 — far better separated than any k-means++ seeding can miss.
std::vector<double> blobs(int64_t classes, int64_t per_class, int64_t d, uint64_t seed,
                          std::vector<int64_t>& labels) {
  std::vector<double> x = test::normal_points(classes * per_class, d, seed);
  labels.clear();
  for (int64_t i = 0; i < classes * per_class; ++i) {
    const int64_t c = i % classes;  // interleaved, so clusters are not index ranges
    labels.push_back(c);
    for (int64_t k = 0; k < d; ++k) x[i * d + k] = 0.05 * x[i * d + k] + (k == c ? 10.0 : 0.0);
  }
  return x;
}

}  // namespace

TEST_CASE("nmi: exactly 1 on well-separated clusters") {
  std::vector<int64_t> labels;
  const std::vector<double> x = blobs(5, 30, 8, 31, labels);
  for (Metric metric : {Metric::N, Metric::E}) {
    for (uint64_t seed : {0u, 1u, 2u}) {
      INFO("metric " << metrics::metric_name(metric) << " seed " << seed);
      CHECK(metrics::clustering_nmi(test::points_from(x, 8, metric), labels, seed) ==
            Approx(1.0).epsilon(1e-12));
    }
  }
}

TEST_CASE("kmeans: hand-computed two clusters on a line") {
  // x = [0, 1, 10, 11], k = 2: whatever the seeding, Lloyd ends with {0, 1} and {10, 11}, centers
  // 0.5 and 10.5, inertia 4 * 0.5^2 = 1.
  const metrics::KMeansResult r =
      metrics::kmeans(test::points_from({0, 1, 10, 11}, 1, Metric::E), {2, 7, 25});
  CHECK(r.converged);
  CHECK(r.assignment[0] == r.assignment[1]);
  CHECK(r.assignment[2] == r.assignment[3]);
  CHECK(r.assignment[0] != r.assignment[2]);
  CHECK(r.inertia == Approx(1.0).epsilon(1e-6));
  CHECK(r.centers[r.assignment[0]] == Approx(0.5));
  CHECK(r.centers[r.assignment[2]] == Approx(10.5));
}

TEST_CASE("kmeans: deterministic for a seed, independent of the thread count") {
  const int64_t n = 300, d = 6;
  const metrics::Points points = test::points_from(test::normal_points(n, d, 41), d, Metric::N);
  const metrics::KMeansOptions options{7, 123, 25};
  const metrics::KMeansResult a = metrics::kmeans(points, options);
  const metrics::KMeansResult b = metrics::kmeans(points, options);
  CHECK(a.assignment == b.assignment);
  CHECK(a.centers == b.centers);
  CHECK(a.iterations == b.iterations);
  // One thread and three, set explicitly: with the default the comparison could be one thread
  // against one thread (a machine with one core, or OMP_NUM_THREADS=1).
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const metrics::KMeansResult single = metrics::kmeans(points, options);
  omp_set_num_threads(3);
  const metrics::KMeansResult three = metrics::kmeans(points, options);
  omp_set_num_threads(saved);
  CHECK(single.assignment == three.assignment);
  CHECK(single.centers == three.centers);
  CHECK(single.assignment == a.assignment);
  CHECK(single.centers == a.centers);
  // Another seed gives another seeding: with one iteration the centers are the seeds.
  const metrics::KMeansResult s1 = metrics::kmeans(points, {7, 1, 1});
  const metrics::KMeansResult s2 = metrics::kmeans(points, {7, 2, 1});
  CHECK(s1.centers != s2.centers);
  CHECK(s1.iterations == 1);
}

TEST_CASE("kmeans: duplicates, k = number of distinct points, and bad k") {
  // [0, 0, 0, 5] with k = 3: only two distinct points, so one center is a duplicate that ends
  // empty (ties go to the smaller center index); the result still assigns every point validly.
  const metrics::KMeansResult r =
      metrics::kmeans(test::points_from({0, 0, 0, 5}, 1, Metric::E), {3, 0, 10});
  CHECK(r.inertia == 0.0);
  CHECK(r.assignment[0] == r.assignment[1]);
  CHECK(r.assignment[1] == r.assignment[2]);
  CHECK(r.assignment[3] != r.assignment[0]);
  const metrics::Points p = test::points_from({0, 1}, 1, Metric::E);
  CHECK_THROWS_WITH(metrics::kmeans(p, {3, 0, 10}), Catch::Contains("k = 3 clusters for 2 points"));
}

TEST_CASE("kmeans: restarts keep the least-inertia run of seeds S, S + 1, ...") {
  const int64_t n = 300, d = 6;
  const metrics::Points points = test::points_from(test::normal_points(n, d, 41), d, Metric::N);
  // The five single runs the restarts are made of; unstructured points give several optima.
  std::vector<metrics::KMeansResult> runs;
  for (uint64_t seed = 120; seed < 125; ++seed)
    runs.push_back(metrics::kmeans(points, {7, seed, 25}));
  size_t best = 0;
  for (size_t r = 1; r < runs.size(); ++r) {
    if (runs[r].inertia < runs[best].inertia) best = r;
  }
  bool differ = false;  // otherwise the choice below would not be tested
  for (const metrics::KMeansResult& run : runs) differ = differ || run.inertia != runs[0].inertia;
  REQUIRE(differ);
  REQUIRE(best != 0);  // the first run is not simply kept

  const metrics::KMeansResult five = metrics::kmeans(points, {7, 120, 25, 5});
  CHECK(five.inertia == runs[best].inertia);
  CHECK(five.assignment == runs[best].assignment);
  CHECK(five.centers == runs[best].centers);
  CHECK(five.iterations == runs[best].iterations);
  // One restart is the single run, bit for bit.
  const metrics::KMeansResult one = metrics::kmeans(points, {7, 120, 25, 1});
  CHECK(one.assignment == runs[0].assignment);
  CHECK(one.centers == runs[0].centers);
  CHECK_THROWS_WITH(metrics::kmeans(points, {7, 123, 25, 0}),
                    Catch::Contains("restarts must be >= 1, got 0"));
  // clustering_nmi passes the restarts on.
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[static_cast<size_t>(i)] = i % 7;
  CHECK(metrics::clustering_nmi(points, labels, 120, 25, 5) ==
        metrics::normalized_mutual_info(labels, runs[best].assignment));
}
