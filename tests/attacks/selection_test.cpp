// attacks/selection.h: each selector's invariants on random distance tables (checked against a
// ranking sorted independently here), reproducibility from the seed, and hand-built tables whose
// right pick is known (GTT, GTM and robrank's GTM index bug, SP references).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <vector>

#include "attacks/selection.h"
#include "engine/random.h"

using attacks::DistanceTable;

namespace {

// B rows over NX items with uniform distances in [0.1, 1); each row's self copy (if any) at 0,
// row 1 has none. Labels: `classes` classes, round robin.
DistanceTable random_table(int64_t rows, int64_t gallery, uint64_t seed) {
  engine::Generator gen(seed);
  DistanceTable table;
  table.rows = rows;
  table.gallery = gallery;
  for (double v : engine::uniform({rows, gallery}, 0.1, 1.0, gen).to_vector()) {
    table.distances.push_back(static_cast<float>(v));
  }
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t self = b == 1 ? -1 : (b * 37) % gallery;
    table.self_index.push_back(self);
    if (self >= 0) table.distances[b * gallery + self] = 0.0f;
  }
  return table;
}

std::vector<int64_t> round_robin(int64_t n, int64_t classes, int64_t shift = 0) {
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = (i + shift) % classes;
  return labels;
}

// The test's own ranking of a row: (distance, index) ascending, self removed.
std::vector<int64_t> reference_ranking(const DistanceTable& table, int64_t row) {
  std::vector<int64_t> items;
  for (int64_t x = 0; x < table.gallery; ++x) {
    if (x != table.self_index[row]) items.push_back(x);
  }
  std::sort(items.begin(), items.end(), [&](int64_t a, int64_t b) {
    const float da = table.at(row, a), db = table.at(row, b);
    return da < db || (da == db && a < b);
  });
  return items;
}

std::set<int64_t> top_set(const DistanceTable& table, int64_t row, int64_t count) {
  std::vector<int64_t> ranking = reference_ranking(table, row);
  return std::set<int64_t>(ranking.begin(), ranking.begin() + count);
}

DistanceTable hand_table(const std::vector<float>& distances, int64_t self) {
  DistanceTable table;
  table.rows = 1;
  table.gallery = static_cast<int64_t>(distances.size());
  table.distances = distances;
  table.self_index = {self};
  return table;
}

}  // namespace

TEST_CASE("selection: ranked items and the top-1% size", "[attacks]") {
  // Row: x0 0.5, x1 0.2 (self), x2 0.2, x3 0.1, x4 0.5: by (distance, index) without x1:
  // x3, x2, x0, x4 (x0 before x4 on the tie).
  DistanceTable table = hand_table({0.5f, 0.2f, 0.2f, 0.1f, 0.5f}, 1);
  CHECK(attacks::ranked_items(table, 0) == std::vector<int64_t>{3, 2, 0, 4});
  CHECK(attacks::ranked_items(table, 0, 2) == std::vector<int64_t>{3, 2});
  CHECK(attacks::top_percent_size(10000) == 100);
  CHECK(attacks::top_percent_size(350) == 3);
  CHECK(attacks::top_percent_size(199) == 1);
  CHECK(attacks::top_percent_size(50) == 1);
  CHECK(attacks::top_percent_size(2) == 1);
  REQUIRE_THROWS_WITH(attacks::top_percent_size(1), Catch::Contains("top_percent_size"));
  DistanceTable random = random_table(4, 300, 1);
  for (int64_t b = 0; b < 4; ++b) {
    CHECK(attacks::ranked_items(random, b) == reference_ranking(random, b));
  }
}

TEST_CASE("selection: CA+, QA+ and TMA draw uniformly over the gallery, reproducibly",
          "[attacks]") {
  DistanceTable table = random_table(6, 500, 2);
  engine::Generator a(7), b(7), c(8);
  std::vector<int64_t> picks = attacks::select_uniform(table, 3, a);
  REQUIRE(picks.size() == 18u);
  for (int64_t p : picks) CHECK((p >= 0 && p < 500));
  CHECK(picks == attacks::select_uniform(table, 3, b));
  CHECK(picks != attacks::select_uniform(table, 3, c));
  // The generator advanced: a second call draws new picks.
  CHECK(picks != attacks::select_uniform(table, 3, a));
}

TEST_CASE("selection: CA- draws from the top-1% without self, with replacement", "[attacks]") {
  DistanceTable table = random_table(6, 700, 3);  // top-1% = 7
  engine::Generator gen(5), again(5);
  std::vector<int64_t> picks = attacks::select_from_top(table, 20, gen);
  REQUIRE(picks.size() == 120u);
  for (int64_t row = 0; row < 6; ++row) {
    const std::set<int64_t> top = top_set(table, row, 7);
    std::set<int64_t> seen;
    for (int64_t w = 0; w < 20; ++w) {
      const int64_t p = picks[row * 20 + w];
      CHECK(top.count(p) == 1);
      CHECK(p != table.self_index[row]);
      seen.insert(p);
    }
    CHECK(seen.size() < 20u);  // 20 draws from 7 items repeat
  }
  CHECK(picks == attacks::select_from_top(table, 20, again));
}

TEST_CASE("selection: QA- picks distinct candidates from the top-1% without self", "[attacks]") {
  DistanceTable table = random_table(6, 1000, 4);  // top-1% = 10
  engine::Generator gen(9), again(9);
  std::vector<int64_t> picks = attacks::select_distinct_from_top(table, 4, gen);
  REQUIRE(picks.size() == 24u);
  for (int64_t row = 0; row < 6; ++row) {
    const std::set<int64_t> top = top_set(table, row, 10);
    const std::set<int64_t> distinct(picks.begin() + row * 4, picks.begin() + row * 4 + 4);
    CHECK(distinct.size() == 4u);
    for (int64_t p : distinct) CHECK(top.count(p) == 1);
    CHECK(distinct.count(table.self_index[row]) == 0);
  }
  CHECK(picks == attacks::select_distinct_from_top(table, 4, again));
  REQUIRE_THROWS_WITH(attacks::select_distinct_from_top(table, 11, gen),
                      Catch::Contains("select_distinct_from_top") && Catch::Contains("11"));
}

TEST_CASE("selection: SP references avoid the candidates and follow the ranking", "[attacks]") {
  DistanceTable table = random_table(5, 1200, 5);  // top-1% = 12
  engine::Generator gen(11);
  // SP-QA-: candidates from the top-1%; references = the first 5 others by rank.
  std::vector<int64_t> lower = attacks::select_distinct_from_top(table, 3, gen);
  std::vector<int64_t> sp_lower = attacks::select_semantic_references(table, lower, 3, 5, false);
  // SP-QA+: uniform candidates, one forced to rank 1 of each row so it must be skipped.
  std::vector<int64_t> raise = attacks::select_uniform(table, 2, gen);
  for (int64_t row = 0; row < 5; ++row) raise[row * 2] = reference_ranking(table, row)[1];
  std::vector<int64_t> sp_raise = attacks::select_semantic_references(table, raise, 2, 5, true);
  REQUIRE(sp_lower.size() == 25u);
  REQUIRE(sp_raise.size() == 25u);
  for (int64_t row = 0; row < 5; ++row) {
    const std::vector<int64_t> ranking = reference_ranking(table, row);
    for (bool is_raise : {false, true}) {
      const std::vector<int64_t>& candidates = is_raise ? raise : lower;
      const int64_t per_row = is_raise ? 2 : 3;
      const std::set<int64_t> chosen(candidates.begin() + row * per_row,
                                     candidates.begin() + (row + 1) * per_row);
      std::vector<int64_t> expected;  // the first 5 non-candidates by rank (top-1% for QA-)
      for (int64_t x : ranking) {
        if (static_cast<int64_t>(expected.size()) < 5 && chosen.count(x) == 0)
          expected.push_back(x);
      }
      const std::vector<int64_t>& got = is_raise ? sp_raise : sp_lower;
      CHECK(std::vector<int64_t>(got.begin() + row * 5, got.begin() + row * 5 + 5) == expected);
      if (!is_raise) {
        const std::set<int64_t> top = top_set(table, row, 12);
        for (int64_t x : expected) CHECK(top.count(x) == 1);
      }
    }
  }
  // A top-1% of 12 with 10 candidates leaves only 2 references per row.
  std::vector<int64_t> many = attacks::select_distinct_from_top(table, 10, gen);
  CHECK(attacks::select_semantic_references(table, many, 10, 5, false).size() == 10u);
}

TEST_CASE("selection: SP references, hand-built QA+ and QA- cases", "[attacks]") {
  // NX = 200 (top-1% = 2); row ranks: x5 (0.01), x9 (0.02), x7 (0.03), x3 (0.04), then the rest
  // at 0.5. Self x0.
  std::vector<float> distances(200, 0.5f);
  distances[0] = 0.0f;
  distances[5] = 0.01f;
  distances[9] = 0.02f;
  distances[7] = 0.03f;
  distances[3] = 0.04f;
  DistanceTable table = hand_table(distances, 0);
  // QA+ with candidate x9: the references skip it: x5, x7, x3.
  CHECK(attacks::select_semantic_references(table, {9}, 1, 3, true) ==
        std::vector<int64_t>{5, 7, 3});
  // QA- with candidate x5 from the top-1% {x5, x9}: only x9 remains.
  CHECK(attacks::select_semantic_references(table, {5}, 1, 5, false) == std::vector<int64_t>{9});
}

TEST_CASE("selection: GTT picks the nearest non-self item", "[attacks]") {
  // Row 0: self x2 at 0; x1 and x3 tie at 0.1: x1 (lower index). Row 1: no self; x2 nearest.
  DistanceTable table;
  table.rows = 2;
  table.gallery = 4;
  table.distances = {0.3f, 0.1f, 0.0f, 0.1f, 0.4f, 0.2f, 0.05f, 0.3f};
  table.self_index = {2, -1};
  CHECK(attacks::select_nearest(table) == std::vector<int64_t>{1, 2});
  DistanceTable random = random_table(5, 300, 6);
  std::vector<int64_t> nearest = attacks::select_nearest(random);
  for (int64_t row = 0; row < 5; ++row) CHECK(nearest[row] == reference_ranking(random, row)[0]);
}

TEST_CASE("selection: GTM targets the nearest other-class item; robrank's index bug", "[attacks]") {
  // Labels x0..x5 = 0, 1, 0, 1, 2, 1; query label 0, self x0.
  const std::vector<int64_t> gallery_labels{0, 1, 0, 1, 2, 1};
  // Row A: d = 0, 0.5, 0.1, 0.3, 0.2, 0.9. Ranking without self: x2 (label 0), x4 (2), x3, x1, x5.
  //   GTM: the nearest item of another class than 0 -> x4.
  //   robrank: the top-1 x2 has label 0; rows of another label in index order [x1, x3, x4, x5];
  //   the nearest of them, x4, sits at position 2 -> gallery index 2 (a class-0 item).
  // Row B: d = 0, 0.5, 0.4, 0.05, 0.2, 0.9. GTM -> x3 (label 1, 0.05).
  //   robrank: the top-1 x3 has label 1; rows of another label than 1 are [x0 (self), x2, x4];
  //   the nearest non-self one, x4, is at position 2 -> 2.
  DistanceTable table;
  table.rows = 2;
  table.gallery = 6;
  table.distances = {0, 0.5f, 0.1f, 0.3f, 0.2f, 0.9f, 0, 0.5f, 0.4f, 0.05f, 0.2f, 0.9f};
  table.self_index = {0, 0};
  const std::vector<int64_t> labels{0, 0};
  CHECK(attacks::select_greedy_misrank_targets(table, labels, gallery_labels, false) ==
        std::vector<int64_t>{4, 3});
  CHECK(attacks::select_greedy_misrank_targets(table, labels, gallery_labels, true) ==
        std::vector<int64_t>{2, 2});

  DistanceTable random = random_table(6, 400, 7);
  const std::vector<int64_t> random_gallery = round_robin(400, 4);
  const std::vector<int64_t> random_labels = round_robin(6, 4, 1);
  std::vector<int64_t> targets =
      attacks::select_greedy_misrank_targets(random, random_labels, random_gallery, false);
  for (int64_t row = 0; row < 6; ++row) {
    CHECK(random_gallery[targets[row]] != random_labels[row]);
    for (int64_t x : reference_ranking(random, row)) {  // nothing of another class is nearer
      if (x == targets[row]) break;
      CHECK(random_gallery[x] == random_labels[row]);
    }
  }
  REQUIRE_THROWS_WITH(
      attacks::select_greedy_misrank_targets(table, {0, 0}, {0, 0, 0, 0, 0, 0}, false),
      Catch::Contains("select_greedy_misrank_targets"));
}

TEST_CASE("selection: STAX/MTAX targets are of other classes, distinct while possible",
          "[attacks]") {
  const std::vector<int64_t> gallery_labels = round_robin(60, 5);
  const std::vector<int64_t> labels = round_robin(8, 5, 2);
  engine::Generator gen(13), again(13);
  // T = 3 of the 4 other classes: labels pairwise different.
  std::vector<int64_t> picks = attacks::select_feature_targets(labels, gallery_labels, 3, gen);
  REQUIRE(picks.size() == 24u);
  CHECK(picks == attacks::select_feature_targets(labels, gallery_labels, 3, again));
  for (int64_t row = 0; row < 8; ++row) {
    std::set<int64_t> classes;
    for (int64_t j = 0; j < 3; ++j) {
      const int64_t p = picks[row * 3 + j];
      REQUIRE((p >= 0 && p < 60));
      CHECK(gallery_labels[p] != labels[row]);
      classes.insert(gallery_labels[p]);
    }
    CHECK(classes.size() == 3u);
  }
  // T = 6 > 4 other classes: the first 4 cover every other class, then labels repeat.
  std::vector<int64_t> more = attacks::select_feature_targets(labels, gallery_labels, 6, gen);
  for (int64_t row = 0; row < 8; ++row) {
    std::set<int64_t> first_four;
    for (int64_t j = 0; j < 6; ++j) {
      const int64_t label = gallery_labels[more[row * 6 + j]];
      CHECK(label != labels[row]);
      if (j < 4) first_four.insert(label);
    }
    CHECK(first_four.size() == 4u);
  }
  REQUIRE_THROWS_WITH(
      attacks::select_feature_targets({1}, {1, 1}, 1, gen),
      Catch::Contains("select_feature_targets") && Catch::Contains("another class"));
}

TEST_CASE("selection: malformed tables are named errors", "[attacks]") {
  DistanceTable table = hand_table({0.1f, 0.2f}, 0);
  table.distances.push_back(0.3f);
  engine::Generator gen(1);
  REQUIRE_THROWS_WITH(attacks::select_uniform(table, 1, gen),
                      Catch::Contains("select_uniform") && Catch::Contains("3 values"));
  DistanceTable bad_self = hand_table({0.1f, 0.2f}, 5);
  REQUIRE_THROWS_WITH(attacks::select_nearest(bad_self), Catch::Contains("self index 5"));
  REQUIRE_THROWS_WITH(
      attacks::select_semantic_references(hand_table({0.1f, 0.2f}, 0), {1, 1}, 1, 1, true),
      Catch::Contains("2 candidates"));
}
