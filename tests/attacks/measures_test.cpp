// attacks/measures.h: the reported numbers of the ranking attacks on hand-built distance tables.
#include <catch2/catch.hpp>

#include <vector>

#include "attacks/measures.h"

using attacks::DistanceTable;

namespace {

DistanceTable table_of(int64_t rows, int64_t gallery, const std::vector<float>& distances,
                       const std::vector<int64_t>& self_index) {
  DistanceTable table;
  table.rows = rows;
  table.gallery = gallery;
  table.distances = distances;
  table.self_index = self_index;
  return table;
}

}  // namespace

TEST_CASE("CA measure: candidate percentile counts strictly nearer items", "[attacks]") {
  // 2 candidates x 2 queries, NX = 4.
  // (0, 0): d(x, q) = 0.1, 0.5, 0.3, 0.9 vs d(c~, q) = 0.4: 0.1 and 0.3 -> 2/4.
  // (0, 1): 0.4, 0.4, 0.5, 0.2 vs 0.4: only 0.2 (ties are not ahead) -> 1/4. Mean 0.375.
  // (1, 0): 0.1, 0.2, 0.3, 0.4 vs 0.05 -> 0. (1, 1): same vs 1.0 -> 4/4. Mean 0.5.
  const std::vector<float> query_gallery{0.1f, 0.5f, 0.3f, 0.9f, 0.4f, 0.4f, 0.5f, 0.2f,
                                         0.1f, 0.2f, 0.3f, 0.4f, 0.1f, 0.2f, 0.3f, 0.4f};
  const std::vector<float> candidate_to_query{0.4f, 0.4f, 0.05f, 1.0f};
  std::vector<double> got =
      attacks::candidate_percentile(query_gallery, candidate_to_query, 2, 2, 4);
  REQUIRE(got.size() == 2u);
  CHECK(got[0] == Approx(0.375).margin(1e-15));
  CHECK(got[1] == Approx(0.5).margin(1e-15));
  REQUIRE_THROWS_WITH(attacks::candidate_percentile(query_gallery, candidate_to_query, 2, 2, 5),
                      Catch::Contains("candidate_percentile"));
}

TEST_CASE("QA measure: query percentile in the full ranking, ties by index", "[attacks]") {
  // d = 0.3, 0.1, 0.3, 0.0 (self x3, kept in the ranking), 0.2.
  // Candidate x2: ahead are x3, x1, x4 and x0 (0.3 tie, lower index): rank 4 -> 4/5 = 0.8.
  // Candidate x0: ahead are x3, x1, x4: rank 3 -> 0.6. Mean 0.7.
  DistanceTable table = table_of(1, 5, {0.3f, 0.1f, 0.3f, 0.0f, 0.2f}, {3});
  std::vector<double> got = attacks::query_percentile(table, {2, 0}, 2);
  REQUIRE(got.size() == 1u);
  CHECK(got[0] == Approx(0.7).margin(1e-15));
  // The self copy itself is rank 0: 0/5.
  CHECK(attacks::query_percentile(table, {3}, 1)[0] == 0.0);
  REQUIRE_THROWS_WITH(attacks::query_percentile(table, {5}, 1),
                      Catch::Contains("query_percentile") && Catch::Contains("index 5"));
}

TEST_CASE("ES:R, LTM, GTM measure: recall@1 excludes the self copy by index", "[attacks]") {
  // Labels x0..x3 = 0, 1, 0, 1.
  // Row 0, label 0, self x0 at 0: nearest other x1 (0.1, label 1) -> miss.
  // Row 1, label 0, self x0 at 0.5 (not the nearest): nearest other x2 (0.2, label 0) -> hit.
  // Row 2, label 1, no self: x0 (0.0) is the nearest -> label 0 -> miss.
  // Row 3, label 1, no self: x1 and x2 tie at 0.1: x1 (lower index, label 1) -> hit.
  DistanceTable table = table_of(4, 4,
                                 {0.0f, 0.1f, 0.2f, 0.3f,  //
                                  0.5f, 0.3f, 0.2f, 0.4f,  //
                                  0.0f, 0.1f, 0.2f, 0.3f,  //
                                  0.3f, 0.1f, 0.1f, 0.2f},
                                 {0, 0, -1, -1});
  std::vector<bool> hits = attacks::recall_at_1(table, {0, 0, 1, 1}, {0, 1, 0, 1});
  CHECK(hits == std::vector<bool>{false, true, false, true});
  REQUIRE_THROWS_WITH(attacks::recall_at_1(table, {0, 0, 1}, {0, 1, 0, 1}),
                      Catch::Contains("recall_at_1"));
}

TEST_CASE("GTT measure: retained in the top k of the non-self ranking", "[attacks]") {
  // d = 0.0 (self x0), 0.5, 0.1, 0.2, 0.3, 0.05, 0.4. Non-self ranking: x5, x2, x3, x4, x6, x1.
  DistanceTable table = table_of(1, 7, {0.0f, 0.5f, 0.1f, 0.2f, 0.3f, 0.05f, 0.4f}, {0});
  auto retained = [&](int64_t item, int64_t k) -> bool {
    return attacks::retained_in_top(table, {item}, k)[0];
  };
  CHECK(retained(5, 1));        // rank 0
  CHECK_FALSE(retained(2, 1));  // rank 1
  CHECK(retained(2, 4));
  CHECK(retained(4, 4));        // rank 3: the last of the top 4
  CHECK_FALSE(retained(6, 4));  // rank 4
  CHECK_FALSE(retained(1, 4));  // rank 5
  // Ties by index: x1 and x2 both at 0.1 behind x3 at 0.05 (self x0): x1 is rank 1, x2 rank 2.
  DistanceTable tie = table_of(1, 4, {0.0f, 0.1f, 0.1f, 0.05f}, {0});
  CHECK(attacks::retained_in_top(tie, {1}, 2)[0]);
  CHECK_FALSE(attacks::retained_in_top(tie, {2}, 2)[0]);
  // Two rows at once, k = 4; the second has no self copy, so x0 counts ahead of everything.
  DistanceTable two =
      table_of(2, 5, {0.0f, 0.4f, 0.3f, 0.2f, 0.1f, 0.0f, 0.4f, 0.3f, 0.2f, 0.1f}, {0, -1});
  CHECK(attacks::retained_in_top(two, {1, 1}, 4) == std::vector<bool>{true, false});
  REQUIRE_THROWS_WITH(attacks::retained_in_top(table, {0}, 4), Catch::Contains("own copy"));
}
