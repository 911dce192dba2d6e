#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "metrics/retrieval.h"
#include "tests/metrics/metrics_test_util.h"

using metrics::Metric;

namespace {

// keys[j] = j: the "ascending distances" of robrank's unit tests (robrank utils.py), where the
// query is index 0 and `relevant_with_self` lists the same-label indices including the query.
std::vector<int64_t> robrank_positions(int64_t n, const std::vector<int64_t>& relevant_with_self) {
  std::vector<float> keys(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) keys[j] = static_cast<float>(j) / static_cast<float>(n);
  std::vector<int64_t> relevant;
  for (int64_t r : relevant_with_self) {
    if (r != 0) relevant.push_back(r);
  }
  return metrics::relevant_positions(keys.data(), n, 0, relevant);
}

}  // namespace

TEST_CASE("recall@k: robrank unit cases, 32 ascending distances") {
  // Relevant {0, 1}, query 0: after dropping the query, item 1 is first -> rank 0, R@1, R@2 hit.
  std::vector<int64_t> p = robrank_positions(32, {0, 1});
  REQUIRE(p == std::vector<int64_t>{1});
  CHECK(p.front() - 1 == 0);
  CHECK(metrics::hit_at_k(p, 1));
  CHECK(metrics::hit_at_k(p, 2));
  // Relevant {0, 2}: item 2 is second -> rank 1, R@1 miss, R@2 hit.
  p = robrank_positions(32, {0, 2});
  REQUIRE(p == std::vector<int64_t>{2});
  CHECK(p.front() - 1 == 1);
  CHECK_FALSE(metrics::hit_at_k(p, 1));
  CHECK(metrics::hit_at_k(p, 2));
}

TEST_CASE("map_at_r10: robrank unit cases, 101 ascending distances") {
  // {0,1}: P@1 = 1 -> 1/10. {0,1,10}: P@1 = 1, P@10 = 2/10 -> 1.2/10. {0,1,2}: 2/10.
  // {0..10}: ten hits in the first ten -> 10/10.
  CHECK(metrics::average_precision_at(robrank_positions(101, {0, 1}), 10) ==
        Approx(0.10).margin(1e-4));
  CHECK(metrics::average_precision_at(robrank_positions(101, {0, 1, 10}), 10) ==
        Approx(0.12).margin(1e-4));
  CHECK(metrics::average_precision_at(robrank_positions(101, {0, 1, 2}), 10) ==
        Approx(0.20).margin(1e-4));
  CHECK(metrics::average_precision_at(robrank_positions(101, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}),
                                      10) == Approx(1.00).margin(1e-4));
}

TEST_CASE("map: full-ranking AP and both mAP@R conventions, hand-computed") {
  // Relevant items at positions 1, 3, 12 (R = 3):
  //   AP        = (1/1 + 2/3 + 3/12) / 3 = (23/12) / 3 = 23/36
  //   AP@R, R=3 = (1/1 + 2/3) / 3 = 5/9          (position 12 > R)
  //   AP@10     = (1/1 + 2/3) / 10 = 1/6         (robrank divides by 10 whatever R is)
  const std::vector<int64_t> p = {1, 3, 12};
  CHECK(metrics::average_precision(p) == Approx(23.0 / 36.0).epsilon(1e-12));
  CHECK(metrics::average_precision_at(p, 3) == Approx(5.0 / 9.0).epsilon(1e-12));
  CHECK(metrics::average_precision_at(p, 10) == Approx(1.0 / 6.0).epsilon(1e-12));
  CHECK(metrics::average_precision({}) == 0.0);
  CHECK_FALSE(metrics::hit_at_k({}, 5));
  // The same positions from a key row: query 0, items 1..12 at keys 1..12, relevant {1, 3, 12}.
  std::vector<float> keys = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  CHECK(metrics::relevant_positions(keys.data(), 13, 0, {12, 3, 1}) == p);
}

TEST_CASE("r_precision and reciprocal rank: per query, hand-computed") {
  // Positions 1, 3, 12 (R = 3): two of the first 3 are relevant -> 2/3; the first is at 1 -> 1.
  CHECK(metrics::r_precision({1, 3, 12}) == Approx(2.0 / 3.0).epsilon(1e-12));
  CHECK(metrics::reciprocal_rank({1, 3, 12}) == 1.0);
  // Positions 2, 3 (R = 2): one of the first 2 -> 1/2; first at 2 -> 1/2.
  CHECK(metrics::r_precision({2, 3}) == 0.5);
  CHECK(metrics::reciprocal_rank({2, 3}) == 0.5);
  // Position 4 (R = 1): the first item is not relevant -> 0; 1/4.
  CHECK(metrics::r_precision({4}) == 0.0);
  CHECK(metrics::reciprocal_rank({4}) == 0.25);
  // All relevant items first: R-precision 1 whatever R.
  CHECK(metrics::r_precision({1, 2, 3, 4}) == 1.0);
  // No relevant item (a lone query): both 0, as PML scores a query with no match in its k.
  CHECK(metrics::r_precision({}) == 0.0);
  CHECK(metrics::reciprocal_rank({}) == 0.0);
}

TEST_CASE("r_precision, mrr and per-class averages: six points on a line, hand-computed") {
  // Metric E, x = [0, 1, 2, 3, 4, 10], labels [A, B, A, A, B, C] = [7, 3, 7, 7, 3, 5]:
  // A = {0, 2, 3}, B = {1, 4}, C = {5} alone. Same source: R = the class size - 1 (the query is not
  // its own neighbour). Rankings by (distance, index), the relevant positions, then AP, AP@R,
  // R-prec, 1/pos_1:
  //   q0 A: 1(1) 2(2) 3(3) 4(4) 5(10)            pos 2, 3  AP 7/12  AP@R 1/4  Rp 1/2  RR 1/2
  //   q1 B: 0(1) 2(1) 3(2) 4(3) 5(9)   tie 0, 2  pos 4     AP 1/4   AP@R 0    Rp 0    RR 1/4
  //   q2 A: 1(1) 3(1) 0(2) 4(2) 5(8)   ties      pos 2, 3  AP 7/12  AP@R 1/4  Rp 1/2  RR 1/2
  //   q3 A: 2(1) 4(1) 1(2) 0(3) 5(7)   tie 2, 4  pos 1, 4  AP 3/4   AP@R 1/2  Rp 1/2  RR 1
  //   q4 B: 3(1) 2(2) 1(3) 0(4) 5(6)             pos 3     AP 1/3   AP@R 0    Rp 0    RR 1/3
  //   q5 C: no relevant item: left out (PML's lone query label).
  // q2's ties decide two metrics: at distance 1 item 1 (B) goes before item 3 (A) by index, so
  // RR is 1/2, not 1; at distance 2 item 0 (A) before item 4 (B), so pos 3, not 4.
  // Means over the 5 scored queries: recall@1 = precision_at_1 = 1/5; recall@2 = 3/5;
  //   map = (7/12 + 3/12 + 7/12 + 9/12 + 4/12) / 5 = 1/2; map_at_r = (1/4 + 1/4 + 1/2) / 5 = 1/5;
  //   r_precision = (3 * 1/2) / 5 = 3/10; mrr = (6 + 3 + 6 + 12 + 4)/12 / 5 = 31/60.
  // Per class (PML avg_of_avgs), over A and B (C has no scored query):
  //   precision_at_1: A (0 + 0 + 1)/3 = 1/3, B 0            -> 1/6
  //   map:            A (7 + 7 + 9)/12/3 = 23/36, B 7/24     -> (46/72 + 21/72)/2 = 67/144
  //   map_at_r:       A (1/4 + 1/4 + 1/2)/3 = 1/3, B 0      -> 1/6
  //   r_precision:    A 1/2, B 0                           -> 1/4
  //   mrr:            A (1/2 + 1/2 + 1)/3 = 2/3, B 7/24      -> (16/24 + 7/24)/2 = 23/48
  const metrics::Points points = test::points_from({0, 1, 2, 3, 4, 10}, 1, Metric::E);
  metrics::RetrievalOptions options;
  options.ks = {1, 2};
  for (int64_t query_block : {0, 1, 4}) {
    options.query_block = query_block;
    INFO("query_block " << query_block);
    const metrics::RetrievalResult r =
        metrics::evaluate_retrieval(points, {7, 3, 7, 7, 3, 5}, options);
    CHECK(r.queries == 5);
    CHECK(r.lone_queries == 1);
    CHECK(r.recall[0] == Approx(0.2).epsilon(1e-12));
    CHECK(r.recall[1] == Approx(0.6).epsilon(1e-12));
    CHECK(r.precision_at_1 == Approx(0.2).epsilon(1e-12));
    CHECK(r.map == Approx(0.5).epsilon(1e-12));
    CHECK(r.map_at_r == Approx(0.2).epsilon(1e-12));
    CHECK(r.r_precision == Approx(0.3).epsilon(1e-12));
    CHECK(r.mrr == Approx(31.0 / 60.0).epsilon(1e-12));
    CHECK(r.per_class.classes == 2);
    CHECK(r.per_class.precision_at_1 == Approx(1.0 / 6.0).epsilon(1e-12));
    CHECK(r.per_class.map == Approx(67.0 / 144.0).epsilon(1e-12));
    CHECK(r.per_class.map_at_r == Approx(1.0 / 6.0).epsilon(1e-12));
    CHECK(r.per_class.r_precision == Approx(0.25).epsilon(1e-12));
    CHECK(r.per_class.mrr == Approx(23.0 / 48.0).epsilon(1e-12));
  }
  // precision_at_1 does not need K = 1 among the ks.
  options.ks = {2};
  options.query_block = 0;
  const metrics::RetrievalResult no_k1 =
      metrics::evaluate_retrieval(points, {7, 3, 7, 7, 3, 5}, options);
  CHECK(no_k1.precision_at_1 == Approx(0.2).epsilon(1e-12));
}

TEST_CASE("r_precision, mrr and per-class averages: every query lone is NaN") {
  const metrics::Points points = test::points_from({0, 1, 3}, 1, Metric::E);
  const metrics::RetrievalResult none = metrics::evaluate_retrieval(points, {0, 1, 2});
  CHECK(std::isnan(none.r_precision));
  CHECK(std::isnan(none.mrr));
  CHECK(std::isnan(none.precision_at_1));
  CHECK(none.per_class.classes == 0);
  CHECK(std::isnan(none.per_class.precision_at_1));
  CHECK(std::isnan(none.per_class.map));
  CHECK(std::isnan(none.per_class.map_at_r));
  CHECK(std::isnan(none.per_class.r_precision));
  CHECK(std::isnan(none.per_class.mrr));
}

TEST_CASE("map: positions use (distance, index) order with exact ties") {
  // Query 2; keys of items 0..4: 5, 1, -, 1, 1. Ranking: 1, 3, 4 (tied at 1, by index), then 0.
  // Relevant {3, 0}: positions 2 and 4.
  std::vector<float> keys = {5, 1, 0, 1, 1};
  CHECK(metrics::relevant_positions(keys.data(), 5, 2, {0, 3}) == std::vector<int64_t>{2, 4});
  // Relevant {4, 1}: item 1 first, item 4 third (item 3 sits between them in the tie).
  CHECK(metrics::relevant_positions(keys.data(), 5, 2, {4, 1}) == std::vector<int64_t>{1, 3});
}

TEST_CASE("recall@k: hand-computed set, metric E") {
  // 1-D points x = [0, 1, 3, 4, 8], labels [A, B, A, B, A]. Rankings (distance, index):
  //   q0: 1(1,B) 2(3,A) 3(4,B) 4(8,A)   relevant pos 2, 4    AP 1/2   AP@R(2) 1/4  AP@10 1/10
  //   q1: 0(1,A) 2(2,A) 3(3,B) 4(7,A)   relevant pos 3       AP 1/3   AP@R(1) 0    AP@10 1/30
  //   q2: 3(1,B) 1(2,B) 0(3,A) 4(5,A)   relevant pos 3, 4    AP 5/12  AP@R(2) 0    AP@10 1/12
  //   q3: 2(1,A) 1(3,B) 0(4,A) 4(4,A)   relevant pos 2       AP 1/2   AP@R(1) 0    AP@10 1/20
  //   q4: 3(4,B) 2(5,A) 1(7,B) 0(8,A)   relevant pos 2, 4    AP 1/2   AP@R(2) 1/4  AP@10 1/10
  // recall@1 = 0, recall@2 = 3/5 (q0, q3, q4), recall@4 = 1; mAP = (27/12)/5 = 0.45;
  // map_at_r = (1/2)/5 = 0.1; map_at_r10 = (22/60)/5 = 11/150.
  const metrics::Points points = test::points_from({0, 1, 3, 4, 8}, 1, Metric::E);
  metrics::RetrievalOptions options;
  options.ks = {1, 2, 4};
  const metrics::RetrievalResult r = metrics::evaluate_retrieval(points, {0, 1, 0, 1, 0}, options);
  REQUIRE(r.recall.size() == 3);
  CHECK(r.recall[0] == 0.0);
  CHECK(r.recall[1] == Approx(0.6).epsilon(1e-12));
  CHECK(r.recall[2] == 1.0);
  CHECK(r.map == Approx(0.45).epsilon(1e-12));
  CHECK(r.map_at_r == Approx(0.1).epsilon(1e-12));
  CHECK(r.map_at_r10 == Approx(11.0 / 150.0).epsilon(1e-12));
  CHECK(r.queries == 5);
  CHECK(r.lone_queries == 0);
}

TEST_CASE("recall@k: the query is excluded by index, not by distance 0") {
  // 2-D, metric E: x0 = x1 = (0,0) with labels 0 and 1, x2 = (1,0) label 0, x3 = (0,3) label 1.
  //   q0: 1(0) 2(1) 3(3)         -> its duplicate (other label) is first; relevant 2 at pos 2
  //   q1: 0(0) 2(1) 3(3)         -> relevant 3 at pos 3
  //   q2: 0(1) 1(1) 3(sqrt 10)   -> tie at 1 goes to index 0, relevant: pos 1
  //   q3: 0(3) 1(3) 2(sqrt 10)   -> tie at 3 goes to index 0, relevant 1 at pos 2
  // recall@1 = 1/4, recall@2 = 3/4. Dropping "the nearest item" instead would drop the duplicate.
  const metrics::Points points = test::points_from({0, 0, 0, 0, 1, 0, 0, 3}, 2, Metric::E);
  metrics::RetrievalOptions options;
  options.ks = {1, 2};
  const metrics::RetrievalResult r = metrics::evaluate_retrieval(points, {0, 1, 0, 1}, options);
  CHECK(r.recall[0] == Approx(0.25).epsilon(1e-12));
  CHECK(r.recall[1] == Approx(0.75).epsilon(1e-12));

  // Four identical rows (metric E: integer keys, exactly 0), labels [0, 0, 1, 1]: every key is
  // equal, so each ranking is
  // index order without the query: q0 -> 1,2,3 (pos 1); q1 -> 0,2,3 (pos 1); q2 -> 0,1,3 (pos 3);
  // q3 -> 0,1,2 (pos 3). recall@1 = 1/2, mAP = (1 + 1 + 1/3 + 1/3)/4 = 2/3.
  const metrics::Points same = test::points_from({1, 2, 1, 2, 1, 2, 1, 2}, 2, Metric::E);
  options.ks = {1};
  const metrics::RetrievalResult s = metrics::evaluate_retrieval(same, {0, 0, 1, 1}, options);
  CHECK(s.recall[0] == Approx(0.5).epsilon(1e-12));
  CHECK(s.map == Approx(2.0 / 3.0).epsilon(1e-12));
}

TEST_CASE("recall@k: lone queries are left out of the means") {
  // x = [0, 1, 5], labels [0, 0, 1]: q0 and q1 find each other first; q2 has no relevant item.
  const metrics::Points points = test::points_from({0, 1, 5}, 1, Metric::E);
  const metrics::RetrievalResult r = metrics::evaluate_retrieval(points, {0, 0, 1});
  CHECK(r.queries == 2);
  CHECK(r.lone_queries == 1);
  CHECK(r.recall[0] == 1.0);
  CHECK(r.map == 1.0);
  const metrics::RetrievalResult none = metrics::evaluate_retrieval(points, {0, 1, 2});
  CHECK(none.queries == 0);
  CHECK(std::isnan(none.map));
}

namespace {

// Every metric of evaluate_retrieval, from the f64 full-sort reference.
metrics::RetrievalResult reference_retrieval(const std::vector<double>& x, int64_t d,
                                             const std::vector<int64_t>& labels, Metric metric,
                                             const std::vector<int64_t>& ks) {
  const int64_t n = static_cast<int64_t>(labels.size());
  metrics::RetrievalResult r;
  r.ks = ks;
  r.recall.assign(ks.size(), 0.0);
  // Per label: {scored queries, sum of p@1, AP, AP@R, R-precision, 1/pos_1} for avg_of_avgs.
  std::map<int64_t, std::array<double, 6>> by_label;
  for (int64_t q = 0; q < n; ++q) {
    const std::vector<int64_t> order = test::reference_ranking(x, n, d, q, metric);
    std::vector<int64_t> pos;
    for (size_t i = 0; i < order.size(); ++i) {
      if (labels[order[i]] == labels[q]) pos.push_back(static_cast<int64_t>(i) + 1);
    }
    if (pos.empty()) {
      ++r.lone_queries;
      continue;
    }
    ++r.queries;
    const double rr = static_cast<double>(pos.size());
    double ap = 0, ap_r = 0, ap_10 = 0, r_prec = 0;
    for (size_t k = 0; k < pos.size(); ++k) {
      const double prec = static_cast<double>(k + 1) / static_cast<double>(pos[k]);
      ap += prec / rr;
      if (static_cast<double>(pos[k]) <= rr) ap_r += prec / rr;
      if (static_cast<double>(pos[k]) <= rr) r_prec += 1.0 / rr;
      if (pos[k] <= 10) ap_10 += prec / 10.0;
    }
    const double p1 = pos[0] == 1 ? 1.0 : 0.0, reciprocal = 1.0 / static_cast<double>(pos[0]);
    r.map += ap;
    r.map_at_r += ap_r;
    r.map_at_r10 += ap_10;
    r.r_precision += r_prec;
    r.mrr += reciprocal;
    r.precision_at_1 += p1;
    std::array<double, 6>& sums = by_label[labels[q]];
    const std::array<double, 6> values = {1.0, p1, ap, ap_r, r_prec, reciprocal};
    for (size_t i = 0; i < sums.size(); ++i) sums[i] += values[i];
    for (size_t i = 0; i < ks.size(); ++i) r.recall[i] += pos[0] <= ks[i] ? 1.0 : 0.0;
  }
  const double c = static_cast<double>(r.queries);
  r.map /= c;
  r.map_at_r /= c;
  r.map_at_r10 /= c;
  r.r_precision /= c;
  r.mrr /= c;
  r.precision_at_1 /= c;
  for (double& v : r.recall) v /= c;
  metrics::ClassAverages& pc = r.per_class;
  for (const auto& [label, sums] : by_label) {
    pc.precision_at_1 += sums[1] / sums[0];
    pc.map += sums[2] / sums[0];
    pc.map_at_r += sums[3] / sums[0];
    pc.r_precision += sums[4] / sums[0];
    pc.mrr += sums[5] / sums[0];
  }
  pc.classes = static_cast<int64_t>(by_label.size());
  const double classes = static_cast<double>(pc.classes);
  pc.precision_at_1 /= classes;
  pc.map /= classes;
  pc.map_at_r /= classes;
  pc.r_precision /= classes;
  pc.mrr /= classes;
  return r;
}

}  // namespace

TEST_CASE("map: tiled equals the untiled f64 reference, integer points with ties") {
  // 103 points (not a multiple of any block size below), 5-D integers in [-2, 2], 9 classes.
  const int64_t n = 103, d = 5;
  const std::vector<double> x = test::integer_points(n, d, 2, 11);
  const std::vector<int64_t> labels = test::random_labels(n, 9, 12);
  const std::vector<int64_t> ks = {1, 2, 4, 8, 200};
  const metrics::RetrievalResult expected = reference_retrieval(x, d, labels, Metric::E, ks);
  const metrics::Points points = test::points_from(x, d, Metric::E);
  const std::vector<std::pair<int64_t, int64_t>> blocks = {
      {1, 5}, {7, 64}, {16, 4096}, {103, 5}, {500, 64}};  // (query_block, gallery_block)
  for (const auto& [qb, gb] : blocks) {
    metrics::RetrievalOptions options;
    options.ks = ks;
    options.query_block = qb;
    options.gallery_block = gb;
    INFO("query_block " << qb << ", gallery_block " << gb);
    test::require_same_retrieval(metrics::evaluate_retrieval(points, labels, options), expected,
                                 1e-12);
  }
}

TEST_CASE("map: tiled equals the untiled f64 reference, metrics N and C") {
  const int64_t n = 61, d = 16;
  const std::vector<double> x = test::normal_points(n, d, 21);
  const std::vector<int64_t> labels = test::random_labels(n, 6, 22);
  for (Metric metric : {Metric::N, Metric::C}) {
    const metrics::RetrievalResult expected = reference_retrieval(x, d, labels, metric, {1, 2, 4});
    const metrics::Points points = test::points_from(x, d, metric);
    for (int64_t qb : {3, 32, 0}) {
      metrics::RetrievalOptions options;
      options.query_block = qb;
      options.gallery_block = 10;
      INFO("metric " << metrics::metric_name(metric) << ", query_block " << qb);
      test::require_same_retrieval(metrics::evaluate_retrieval(points, labels, options), expected,
                                   1e-12);
    }
  }
}

TEST_CASE("map: the automatic query block respects the memory budget") {
  const metrics::Points points = test::points_from(test::normal_points(50, 4, 3), 4, Metric::N);
  metrics::RetrievalOptions options;
  options.memory_budget_bytes = 50 * 4 * 7;  // room for 7 rows of 50 keys
  const metrics::RetrievalResult r =
      metrics::evaluate_retrieval(points, test::random_labels(50, 5, 4), options);
  CHECK(r.query_block == 7);
}

TEST_CASE("map: bad input is reported") {
  const metrics::Points points = test::points_from({0, 1, 2}, 1, Metric::E);
  CHECK_THROWS_WITH(metrics::evaluate_retrieval(points, {0, 1}),
                    Catch::Contains("2 labels for 3 embeddings"));
  metrics::RetrievalOptions options;
  options.ks = {0};
  CHECK_THROWS_WITH(metrics::evaluate_retrieval(points, {0, 0, 1}, options),
                    Catch::Contains("K >= 1"));
  CHECK_THROWS_WITH(metrics::parse_metric("L2"), Catch::Contains("'L2'"));
  const float nan_row[2] = {1.0f, NAN};
  CHECK_THROWS_WITH(metrics::make_points(nan_row, 1, 2, Metric::N),
                    Catch::Contains("row 0 column 1"));
}
