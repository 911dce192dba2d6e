// Which queries, candidates and targets each attack uses (Zhou et al. TPAMI §6.1.2;
// robrank attacks/advrank_qcselector.py), chosen once per batch from the CLEAN distances.
//
// Input: a DistanceTable = the clean distances from B attacked images to the NX gallery items
// (row-major, host), the gallery row holding each attacked image's own clean copy (self_index,
// -1 = not in the gallery), and labels. "Rank" below is the position in a row sorted by
// (distance, gallery index) ascending with the self row removed BY INDEX (docs/architecture.md), so
// rank 0 is the nearest other item. top-1% = the first floor(0.01 NX) ranks (at least 1).
//
//   CA+   W queries uniform with replacement over the whole gallery.
//   CA-   W queries uniform with replacement over the candidate's top-1% (robrank: "topk(1%+1)
//         without the nearest", the nearest being the self copy).
//   QA+   M candidates uniform with replacement over the whole gallery.
//   QA-   M distinct candidates uniform over the query's top-1% (a random permutation's first M;
//         M > top-1% is an error).
//   SP references (G of them, never a candidate: C_SP drawn from X \ C, Zhou et al. TPAMI eq. 12):
//         QA+ -> the first G by rank that are not candidates (ranks 0..G-1 unless a random
//         candidate falls there); QA- -> the first G by rank of the top-1% items not chosen as
//         candidates (min(G, top-1% - M) of them if the top-1% is too small: the same count in
//         every row, so the result is [B, that count]).
//   TMA   one target uniform over the whole gallery.
//   GTM   the nearest item of another label than the query's (Zhou et al. TPAMI eq. 24);
//         with robrank_compat, robrank's behaviour: the label compared against is that of the
//         nearest non-self item, and the arg-min position WITHIN the filtered list of gallery rows
//         is then used as a gallery index (robrank's bug, docs/attacks.md).
//   GTT   the nearest non-self item (rank 0).
//   STAX/MTAX  T targets uniform over gallery items whose label differs from the query's, with
//         pairwise different labels while enough classes exist (MDProp eq. 3: "images of target
//         identities ... j != l"); with fewer than T other classes labels repeat. Target j is
//         uniform over the items of the classes not yet used in the row (all other classes again
//         once each has been used), one uniform draw per target.
//
// Every function draws from `gen` in a fixed pattern for a given (B, W/M/T) so that a run is
// reproducible from its seed. All outputs are row-major [B, W|M|G|T] gallery indices.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/random.h"

namespace attacks {

struct DistanceTable {
  int64_t rows = 0;                 // B attacked images
  int64_t gallery = 0;              // NX
  std::vector<float> distances;     // rows * gallery, row-major
  std::vector<int64_t> self_index;  // rows entries, -1 when the image is not in the gallery
  float at(int64_t row, int64_t item) const { return distances[row * gallery + item]; }
};

// The gallery indices of row `row` sorted by (distance, index), self removed; only the first
// `count` (all when count < 0).
std::vector<int64_t> ranked_items(const DistanceTable& table, int64_t row, int64_t count = -1);

// floor(0.01 * NX), at least 1 and at most NX - 1 (NX >= 2 required).
int64_t top_percent_size(int64_t gallery);

std::vector<int64_t> select_uniform(const DistanceTable& table, int64_t per_row,
                                    engine::Generator& gen);  // CA+, QA+, TMA (per_row = 1)
std::vector<int64_t> select_from_top(const DistanceTable& table, int64_t per_row,
                                     engine::Generator& gen);  // CA- (with replacement)
std::vector<int64_t> select_distinct_from_top(const DistanceTable& table, int64_t per_row,
                                              engine::Generator& gen);  // QA-
// The SP references for SP-QA+ (raise) or SP-QA- given the chosen candidates [B, M].
std::vector<int64_t> select_semantic_references(const DistanceTable& table,
                                                const std::vector<int64_t>& candidates,
                                                int64_t per_row, int64_t references, bool raise);
std::vector<int64_t> select_greedy_misrank_targets(const DistanceTable& table,
                                                   const std::vector<int64_t>& query_labels,
                                                   const std::vector<int64_t>& gallery_labels,
                                                   bool robrank_compat);  // GTM
std::vector<int64_t> select_nearest(const DistanceTable& table);          // GTT
std::vector<int64_t> select_feature_targets(const std::vector<int64_t>& query_labels,
                                            const std::vector<int64_t>& gallery_labels,
                                            int64_t targets, engine::Generator& gen);  // STAX/MTAX

}  // namespace attacks
