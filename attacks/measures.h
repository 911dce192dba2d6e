// What each attack reports (Zhou et al. TPAMI §6.1.2 and §6.1.4; robrank attacks/advrank_loss.py),
// computed without gradients from distances on the host. One value per attacked image; the caller
// averages over images (the paper's "averaged over T = |X| trials"). Ranks follow
// attacks/selection.h: sorted by (distance, gallery index), positions 0-based.
//
//   CA±      candidate_percentile: per candidate, the mean over its W queries of the fraction of
//            gallery items x with d(x, q_w) < d(c~, q_w) ... strictly ahead of the candidate,
//            robrank's `(A > B).mean()`. Percent in the tables (x 100).
//   QA±      query_percentile: per query, the mean over its M candidates of rank_of(candidate) / NX
//            in the perturbed query's full ranking (the self copy is NOT removed, as robrank).
//   TMA      the cosine similarity of q~ and its target (targeted_mismatch_loss's complement).
//   ES:D     the metric distance d(q~, q) between adversarial and clean embedding.
//   ES:R, LTM, GTM, STAX/MTAX
//            recall_at_1: whether the nearest non-self gallery item has the query's label.
//   GTT      retained_in_top: whether the clean top-1 item is still among the first k (k = 4 for
//            ERS) non-self items of the perturbed ranking.
#pragma once

#include <cstdint>
#include <vector>

#include "attacks/selection.h"

namespace attacks {

// query_gallery: for each candidate b and query w, d(x, q_bw) over the gallery [B * W * NX]
// (row-major, the same constant the CA objective uses); candidate_to_query: d(c~_b, q_bw)
// [B * W]. Returns B fractions in [0, 1].
std::vector<double> candidate_percentile(const std::vector<float>& query_gallery,
                                         const std::vector<float>& candidate_to_query, int64_t rows,
                                         int64_t per_row, int64_t gallery);

// table: d(q~_b, x) of the perturbed queries; candidates [B * M]. Returns B fractions in [0, 1).
std::vector<double> query_percentile(const DistanceTable& table,
                                     const std::vector<int64_t>& candidates, int64_t per_row);

std::vector<bool> recall_at_1(const DistanceTable& table, const std::vector<int64_t>& query_labels,
                              const std::vector<int64_t>& gallery_labels);

std::vector<bool> retained_in_top(const DistanceTable& table, const std::vector<int64_t>& items,
                                  int64_t k);

}  // namespace attacks
