// The objectives of the ranking attacks (Zhou et al. TPAMI §3, §5; MDProp eq. 3, eq. 16;
// robrank attacks/advrank_loss.py), as differentiable functions of embeddings.
//
// Every function takes embeddings *as the metric sees them* (losses::embed_for_metric: rows
// L2-normalized for N and C, raw for E) and is differentiable with respect to its FIRST argument
// only (the perturbed images' embeddings); every other tensor is a constant (gallery, selected
// queries/candidates/targets) and must not require grad. The PGD engine *descends* each objective
// (docs/attacks.md), so "raise the rank" objectives are written as losses to minimize. Distances
// are Euclidean for N and E, 1 - cos for C: query-vs-gallery ones through gallery_distance (one
// GEMM; the per-row distances compared with them in a hinge use its formula too), the others
// through losses::row_distance.
//
// Reductions follow robrank: a mean over everything (per query, then over the batch), so values
// are comparable between batch sizes; sign-gradient PGD is invariant to a positive scale of a
// query's term, except where two terms are mixed (SP-QA's xi, which is therefore per query).
//
//   CA+  (candidate c~, its W queries q_w):   mean_b mean_{w,x} [d(c~_b, q_bw) - d(x, q_bw)]_+
//   CA-                                        mean_b mean_{w,x} [d(x, q_bw) - d(c~_b, q_bw)]_+
//   QA+  (query q~, its M candidates c_m):     mean_b mean_{m,x} [d(q~_b, c_bm) - d(q~_b, x)]_+
//   QA-                                        mean_b mean_{m,x} [d(q~_b, x) - d(q~_b, c_bm)]_+
//   SP-QA±  mean_b (QA±_b (candidates) + xi_b * QA+_b (the G = 5 semantic-preserving
//            references)), xi_b = min(1e9, exp(zeta * L_SP,b)) for query b's own references,
//            recomputed at every step and not differentiated (Zhou et al. TPAMI eq. 12-13, written
//            for one query). robrank weighs the batch means with one xi from the batch mean of
//            L_SP, so one query whose references slip raises every other query's xi; that is the
//            --robrank-compat form (attack.cpp).
//   TMA  mean_b (1 - cos(q~_b, t_b))                          (Zhou et al. TPAMI eq. 22)
//   ES   -mean_b d(q~_b, q_b)  (maximizes the embedding shift; q_b = clean embedding)
//   LTM  mean_b [max_{x: y_x != y_b} d(q~_b, x) - min_{x: y_x = y_b, x != self_b} d(q~_b, x)]_+
//        (Zhou et al. TPAMI eq. 23)
//   GTM  mean_b d(q~_b, t_b), t_b the clean query's nearest different-class item (eq. 24)
//   GTT  QA- with the single candidate t1_b = the clean query's nearest non-self item (eq. 25)
//   STAX mean_b ||q~_b - t_b||^2         (MDProp eq. 16, squared L2)
//   MTAX mean_b (1/T) sum_j ||q~_b - t_bj||^2   (MDProp eq. 3, p = 2 squared)
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"
#include "losses/distance.h"

namespace attacks {

using losses::Metric;

// Every query against every gallery row, [B, D] x [NX, D] -> [B, NX], through one GEMM
// (engine::linear; losses::distance_matrix's per-pair loop is far too slow for a 10,000-row
// gallery): for N and E sqrt(max(|q|^2 + |x|^2 - 2 <q, x>, 1e-12)), the floor keeping the gradient
// finite (0) where q sits on its own clean copy, as torch.cdist computes large inputs; for C
// 1 - <q, x> / (|q| |x|). Differentiable in both arguments. Also what the caller should use for
// CA's query_gallery constant and for the measures' distance tables.
engine::Tensor gallery_distance(const engine::Tensor& queries, const engine::Tensor& gallery,
                                Metric metric);

// CA+ (raise = true) or CA- (raise = false). candidates [B, D] (differentiable); queries
// [B, W, D]; query_gallery [B, W, NX] = d(x, q_bw) for every gallery item x (a constant,
// computed once per batch by the caller with gallery_distance). Returns a scalar.
engine::Tensor candidate_attack_loss(const engine::Tensor& candidates,
                                     const engine::Tensor& queries,
                                     const engine::Tensor& query_gallery, Metric metric,
                                     bool raise);

// QA+ (raise = true) or QA- (raise = false). queries [B, D] (differentiable); candidates
// [B, M, D]; gallery [NX, D]. Returns a scalar. Also GTT (raise = false, M = 1) and the SP term
// (raise = true on the references).
engine::Tensor query_attack_loss(const engine::Tensor& queries, const engine::Tensor& candidates,
                                 const engine::Tensor& gallery, Metric metric, bool raise);
// The same from to_gallery = gallery_distance(queries, gallery, metric) [B, NX], computed once by
// the caller when several QA terms share it (SP-QA: the candidates' term and the references').
engine::Tensor query_attack_loss_from_distances(const engine::Tensor& queries,
                                                const engine::Tensor& candidates,
                                                const engine::Tensor& to_gallery, Metric metric,
                                                bool raise);

// Per query: [B], row b = QA±'s mean over (m, x) for query b alone; the mean of these rows is
// query_attack_loss_from_distances (up to the order of the float sums). SP-QA's two terms.
engine::Tensor query_attack_rows_from_distances(const engine::Tensor& queries,
                                                const engine::Tensor& candidates,
                                                const engine::Tensor& to_gallery, Metric metric,
                                                bool raise);

// SP-QA's weight xi = min(1e9, exp(zeta * sp_loss)), elementwise (one per query, or one for a
// batch mean), as a detached tensor on sp_loss's device (no host synchronization); an
// overflowing exp (+inf) saturates at 1e9 (a NaN loss stays NaN: the objective it weighs is NaN
// then anyway).
engine::Tensor semantic_preserving_weight(const engine::Tensor& sp_loss, double zeta);

// SP-QA's objective from its two per-query terms, qa_rows and sp_rows [B] (from
// query_attack_rows_from_distances): mean_b (qa_b + xi(sp_b) sp_b), the paper's per-query xi;
// or, with batch_xi (robrank's, --robrank-compat), mean(qa) + xi(mean sp) mean(sp).
engine::Tensor semantic_preserving_query_loss(const engine::Tensor& qa_rows,
                                              const engine::Tensor& sp_rows, double zeta,
                                              bool batch_xi);

// TMA: queries [B, D] (differentiable), targets [B, D]. Cosine on the rows whatever the metric.
engine::Tensor targeted_mismatch_loss(const engine::Tensor& queries, const engine::Tensor& targets);

// ES: queries [B, D] (differentiable), references [B, D] (the clean embeddings, possibly with
// the caller's 1e-7 offset at the first step). Returns -mean row distance.
engine::Tensor embedding_shift_loss(const engine::Tensor& queries, const engine::Tensor& references,
                                    Metric metric);

// LTM: queries [B, D] (differentiable); gallery [NX, D]; gallery_labels and query_labels on the
// host; self_index[b] = the gallery row holding query b's clean copy (-1: none), excluded from the
// positive set unless include_self (robrank's behaviour: its mask is not applied in place, so the
// self copy stays a positive; --robrank-compat). A query without a negative or a positive
// contributes 0. The max and min are located on the detached distances (host) and the selected
// distances recomputed differentiably, so the gradient is the hinge's subgradient at the argmax
// and argmin.
engine::Tensor learning_to_misrank_loss(const engine::Tensor& queries,
                                        const engine::Tensor& gallery,
                                        const std::vector<int64_t>& gallery_labels,
                                        const std::vector<int64_t>& query_labels,
                                        const std::vector<int64_t>& self_index, Metric metric,
                                        bool include_self);

// GTM: queries [B, D] (differentiable), targets [B, D]: mean row distance.
engine::Tensor greedy_top1_misrank_loss(const engine::Tensor& queries,
                                        const engine::Tensor& targets, Metric metric);

// STAX (T = 1) and MTAX: queries [B, D] (differentiable), targets [B, T, D]: mean over b of the
// mean over j of the squared Euclidean distance ||q_b - t_bj||^2 (whatever the metric: the
// MDProp papers' feature-space loss on the embeddings as given).
engine::Tensor feature_targeted_loss(const engine::Tensor& queries, const engine::Tensor& targets);

// Per-row forms [B] of the objectives above, row b = image b's own loss, for the NES black-box
// attack (attacks/nes.h), which needs each image's loss separately. The scalar objective is
// their mean (up to the order of the float sums). QA and GTT: query_attack_rows_from_distances;
// TMA, ES and GTM: losses::row_distance; SP-QA: semantic_preserving_query_rows.
engine::Tensor candidate_attack_rows(const engine::Tensor& candidates,
                                     const engine::Tensor& queries,
                                     const engine::Tensor& query_gallery, Metric metric,
                                     bool raise);
engine::Tensor learning_to_misrank_rows(const engine::Tensor& queries,
                                        const engine::Tensor& gallery,
                                        const std::vector<int64_t>& gallery_labels,
                                        const std::vector<int64_t>& query_labels,
                                        const std::vector<int64_t>& self_index, Metric metric,
                                        bool include_self);
engine::Tensor feature_targeted_rows(const engine::Tensor& queries, const engine::Tensor& targets);
// qa_b + xi_b sp_b per query (batch_xi: one xi from mean(sp), robrank's).
engine::Tensor semantic_preserving_query_rows(const engine::Tensor& qa_rows,
                                              const engine::Tensor& sp_rows, double zeta,
                                              bool batch_xi);

}  // namespace attacks
