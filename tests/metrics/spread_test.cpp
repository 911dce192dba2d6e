#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "metrics/evaluate.h"
#include "metrics/spread.h"
#include "tests/metrics/metrics_test_util.h"

using metrics::Metric;

TEST_CASE("pi_ratio: hand-computed, metric E with a singleton class") {
  // 1-D: class A = {0, 2}, class B = {10, 11, 13}, class C = {20}.
  //   intra A: d(0,2) = 2 both ways -> 2;  intra B: ordered pairs 2 * (1 + 3 + 2) / 6 = 2;
  //   C has no pair and is left out -> pi_intra = (2 + 2) / 2 = 2.
  //   means 1, 34/3, 20: |A-B| = 31/3, |A-C| = 19, |B-C| = 26/3 -> mean over the 6 ordered
  //   pairs = (31/3 + 57/3 + 26/3) / 3 = 38/3 -> pi_ratio = 2 / (38/3) = 3/19.
  const metrics::Spread s = metrics::embedding_spread(
      test::points_from({0, 2, 10, 11, 13, 20}, 1, Metric::E), {7, 7, 3, 3, 3, 9});
  CHECK(s.intra == Approx(2.0).epsilon(1e-6));
  CHECK(s.inter == Approx(38.0 / 3.0).epsilon(1e-6));
  CHECK(s.ratio == Approx(3.0 / 19.0).epsilon(1e-6));
  CHECK(s.classes_with_pairs == 2);
}

TEST_CASE("pi_ratio: hand-computed, metrics N and C normalize first") {
  // A = {(3, 0), (0, 2)}, B = {(-1, 0), (0, -5)}: normalized A = {e1, e2}, B = {-e1, -e2}.
  //   N: intra = |e1 - e2| = sqrt 2 in both classes; means (1/2, 1/2), (-1/2, -1/2) are
  //      sqrt 2 apart -> pi_ratio = 1.
  //   C: intra = 1 - cos 90deg = 1; the means point in opposite directions: 1 - (-1) = 2
  //      -> pi_ratio = 1/2.
  const std::vector<double> x = {3, 0, 0, 2, -1, 0, 0, -5};
  const std::vector<int64_t> labels = {0, 0, 1, 1};
  const metrics::Spread n = metrics::embedding_spread(test::points_from(x, 2, Metric::N), labels);
  CHECK(n.intra == Approx(std::sqrt(2.0)).epsilon(1e-6));
  CHECK(n.inter == Approx(std::sqrt(2.0)).epsilon(1e-6));
  CHECK(n.ratio == Approx(1.0).epsilon(1e-6));
  const metrics::Spread c = metrics::embedding_spread(test::points_from(x, 2, Metric::C), labels);
  CHECK(c.ratio == Approx(0.5).epsilon(1e-6));
}

TEST_CASE("pi_ratio: the evaluation measures metric E on L2-normalized rows, as N") {
  // The set above: on raw rows (the function with E points) intra A = sqrt 13, intra B = sqrt 26,
  // the means (3/2, 1) and (-1/2, -5/2) are sqrt(65)/2 apart -> (sqrt 13 + sqrt 26) / sqrt 65;
  // the evaluation normalizes first (issue 5) and reports N's 1.
  const std::vector<double> x = {3, 0, 0, 2, -1, 0, 0, -5};
  const std::vector<int64_t> labels = {0, 0, 1, 1};
  const metrics::Points raw = test::points_from(x, 2, Metric::E);
  CHECK(metrics::embedding_spread(raw, labels).ratio ==
        Approx((std::sqrt(13.0) + std::sqrt(26.0)) / std::sqrt(65.0)).epsilon(1e-6));
  metrics::EvaluationOptions options;
  options.retrieval.ks = {1};
  options.clustering = false;
  const metrics::Evaluation e = metrics::evaluate_embeddings(raw, labels, options);
  CHECK(e.spread.ratio == Approx(1.0).epsilon(1e-6));
  CHECK(e.metric == Metric::E);  // the ranking stays on raw rows
}

TEST_CASE("pi_ratio: tiled sums equal the f64 definition across tile boundaries") {
  // One class of 300 rows (more than one 256-row tile), one of 40 and one of 1.
  const int64_t d = 3;
  const std::vector<double> x = test::normal_points(341, d, 51);
  std::vector<int64_t> labels(341, 0);
  for (int64_t i = 300; i < 340; ++i) labels[i] = 1;
  labels[340] = 2;
  const std::vector<std::vector<int64_t>> classes = {[] {
                                                       std::vector<int64_t> v;
                                                       for (int64_t i = 0; i < 300; ++i)
                                                         v.push_back(i);
                                                       return v;
                                                     }(),
                                                     [] {
                                                       std::vector<int64_t> v;
                                                       for (int64_t i = 300; i < 340; ++i)
                                                         v.push_back(i);
                                                       return v;
                                                     }(),
                                                     {340}};
  // Reference on the f64 values (metric E): per-class mean over ordered pairs, then the means.
  double intra = 0;
  std::vector<std::vector<double>> means;
  for (const auto& members : classes) {
    std::vector<double> mu(d, 0.0);
    for (int64_t i : members) {
      for (int64_t k = 0; k < d; ++k) mu[k] += x[i * d + k] / static_cast<double>(members.size());
    }
    means.push_back(mu);
    if (members.size() < 2) continue;
    double sum = 0;
    for (int64_t i : members) {
      for (int64_t j : members) {
        if (i != j) sum += test::reference_distance(x, d, i, j, Metric::E);
      }
    }
    const double m = static_cast<double>(members.size());
    intra += sum / (m * (m - 1)) / 2.0;  // two classes have pairs
  }
  double inter = 0;
  for (int l = 0; l < 3; ++l) {
    for (int k = 0; k < 3; ++k) {
      if (l == k) continue;
      double sq = 0;
      for (int64_t c = 0; c < d; ++c)
        sq += (means[l][c] - means[k][c]) * (means[l][c] - means[k][c]);
      inter += std::sqrt(sq) / 6.0;
    }
  }
  const metrics::Spread s = metrics::embedding_spread(test::points_from(x, d, Metric::E), labels);
  CHECK(s.intra == Approx(intra).epsilon(1e-5));
  CHECK(s.inter == Approx(inter).epsilon(1e-5));
  CHECK(s.ratio == Approx(intra / inter).epsilon(1e-5));
}

TEST_CASE("pi_ratio: undefined cases are NaN") {
  // Every class a singleton: no intra pair. One class: no pair of means.
  CHECK(
      std::isnan(metrics::embedding_spread(test::points_from({0, 1}, 1, Metric::E), {0, 1}).ratio));
  CHECK(
      std::isnan(metrics::embedding_spread(test::points_from({0, 1}, 1, Metric::E), {4, 4}).ratio));
}
