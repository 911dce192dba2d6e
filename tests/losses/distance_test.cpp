// losses/distance.h: the N / E / C metrics, robrank's row distance, the NaN-free mining matrix
// and the SPC-2 batch checks.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/ops.h"
#include "losses/distance.h"
#include "tests/losses/helpers.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"

using engine::Tensor;
using losses::Metric;
using losses_test::f64;
using losses_test::labels_of;

TEST_CASE("metric: names, parsing and the papers' margins", "[losses][distance]") {
  CHECK(losses::parse_metric("N") == Metric::N);
  CHECK(losses::parse_metric("e") == Metric::E);
  CHECK(losses::parse_metric("C") == Metric::C);
  CHECK(std::string(losses::metric_name(Metric::E)) == "E");
  CHECK(losses::default_margin(Metric::N) == 0.2);
  CHECK(losses::default_margin(Metric::C) == 0.2);
  CHECK(losses::default_margin(Metric::E) == 1.0);
  REQUIRE_THROWS_WITH(losses::parse_metric("L2"), Catch::Contains("L2"));
}

TEST_CASE("row distance: hand-computed N, E and C", "[losses][distance]") {
  // a = (3, 4), b = (0, 0) and a = (1, 0), b = (0, 2).
  // E: |(3, 4) + 1e-6| = 5 + (3 + 4)/5 * 1e-6 = 5.0000014; |(1, -2) + 1e-6| = sqrt(5) -
  // 1e-6/sqrt(5)
  //    (PyTorch's pairwise_distance adds eps to the difference, robrank inherits it).
  Tensor a = f64({3, 4, 1, 0}, {2, 2});
  Tensor b = f64({0, 0, 0, 2}, {2, 2});
  test::require_close(losses::row_distance(a, b, Metric::E),
                      {5.0000014, std::sqrt(5.0) - 1e-6 / std::sqrt(5.0)}, 1e-9, 0, "E");
  // N: the caller normalizes: (0.6, 0.8) vs b = (0, 0) stays 0 -> |(0.6, 0.8)| = 1 (+ 1.4e-6);
  //    (1, 0) vs (0, 1): sqrt(2).
  Tensor an = losses::embed_for_metric(a, Metric::N), bn = losses::embed_for_metric(b, Metric::N);
  test::require_close(losses::row_distance(an, bn, Metric::N), {1.0000014, std::sqrt(2.0)}, 1e-6, 0,
                      "N");
  // C: 1 - cos: (3, 4) vs (4, 3) -> 1 - 24/25 = 0.04; (1, 0) vs (0, 2) -> 1.
  Tensor c = f64({4, 3, 0, 2}, {2, 2});
  test::require_close(losses::row_distance(a, c, Metric::C), {0.04, 1.0}, 1e-12, 0, "C");
  // E leaves the embeddings alone, N and C normalize rows.
  test::require_close(losses::embed_for_metric(a, Metric::E), {3, 4, 1, 0}, 0, 0, "E embed");
  test::require_close(losses::embed_for_metric(a, Metric::C), {0.6, 0.8, 1, 0}, 1e-15, 0, "C");
}

TEST_CASE("row distance grad: N, E and C", "[losses][distance][grad]") {
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    Tensor a = test::random_leaf({4, 3}, 11), b = test::random_leaf({4, 3}, 12);
    test::require_gradcheck(
        [metric](const std::vector<Tensor>& in) {
          return losses::row_distance(losses::embed_for_metric(in[0], metric),
                                      losses::embed_for_metric(in[1], metric), metric);
        },
        {a, b});
  }
}

TEST_CASE("mining distances: exact zero diagonal, no NaN for duplicates and near rows",
          "[losses][distance]") {
  // Rows 0 and 1 are identical, row 2 differs from them by 1e-4 in one of three large
  // coordinates: the Gram trick |x|^2 + |y|^2 - 2<x, y> cancels to noise (or below 0 -> NaN)
  // here, the direct differences give 0 and 1e-4.
  Tensor x = f64({1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000.0001}, {3, 3});
  const std::vector<double> d = losses::mining_distances(x, Metric::E);
  REQUIRE(d.size() == 9);
  for (double v : d) CHECK_FALSE(std::isnan(v));
  for (int i = 0; i < 3; ++i) CHECK(d[i * 3 + i] == 0.0);
  CHECK(d[1] == 0.0);
  CHECK(d[2] == Approx(1e-4).epsilon(1e-6));
  for (Metric metric : {Metric::N, Metric::C}) {
    const std::vector<double> dn = losses::mining_distances(x, metric);
    for (double v : dn) CHECK_FALSE(std::isnan(v));
    CHECK(std::fabs(dn[0]) < 1e-12);
  }
  // The embeddings' autograd state is untouched (computed under NoGradGuard on a detached copy).
  Tensor leaf = test::random_leaf({4, 2}, 3);
  losses::mining_distances(leaf, Metric::N);
  CHECK_FALSE(leaf.grad().defined());
}

TEST_CASE("spc2 batch check: names what is wrong", "[losses][distance]") {
  Tensor x = f64({0, 1, 2, 3, 4, 5}, {3, 2});
  REQUIRE_THROWS_WITH(losses::check_spc2_batch(x, labels_of({0, 0, 1}), "mine_triplets"),
                      Catch::Contains("mine_triplets") && Catch::Contains("even"));
  Tensor y = f64({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2});
  REQUIRE_THROWS_WITH(losses::check_spc2_batch(y, labels_of({0, 0, 1, 2}), "mine_triplets"),
                      Catch::Contains("labels[2] == labels[3]"));
  REQUIRE_THROWS_WITH(losses::check_spc2_batch(y, labels_of({0, 0, 1}), "lifted_loss"),
                      Catch::Contains("lifted_loss") && Catch::Contains("labels"));
  REQUIRE_THROWS_WITH(losses::check_spc2_batch(y, f64({0, 0, 1, 1}, {4}), "npair_loss"),
                      Catch::Contains("i64"));
  CHECK(losses::check_spc2_batch(y, labels_of({3, 3, 1, 1}), "ok") ==
        std::vector<int64_t>{3, 3, 1, 1});
}
