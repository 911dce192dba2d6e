// attacks/objectives.h: every ranking attack's objective on hand-computed 1-D and 2-D cases, f64
// finite-difference gradients away from hinge kinks and argmax switches, and that only the
// perturbed embeddings are differentiated (gallery, queries and targets are plain constants).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "attacks/objectives.h"
#include "engine/autograd.h"
#include "engine/device.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "losses/distance.h"
#include "tests/support/allclose.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tolerance.h"

using engine::Tensor;
using losses::Metric;

namespace {

Tensor f64(const std::vector<double>& values, const engine::Shape& shape) {
  return Tensor::from_vector(values, shape, engine::DType::F64);
}

Tensor random_constant(const engine::Shape& shape, uint64_t seed) {
  engine::Generator gen(seed);
  return engine::uniform(shape, -1.0, 1.0, gen, engine::DType::F64);
}

// The smallest |d(r_b, o_bk) - d(x, o_bk)| over b, k and gallery rows x, measured independently
// with the pairwise op: a gradient check is valid only when it is away from 0 (hinge kinks).
double smallest_gap(const Tensor& rows, const Tensor& others, const Tensor& gallery,
                    Metric metric) {
  const int64_t batch = others.size(0), per_row = others.size(1), width = others.size(2);
  const Tensor flat = others.reshape({batch * per_row, width});
  const std::vector<double> to_others = losses::distance_matrix(rows, flat, metric).to_vector();
  const std::vector<double> to_gallery = losses::distance_matrix(flat, gallery, metric).to_vector();
  double smallest = INFINITY;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < per_row; ++k) {
      const double own = to_others[b * batch * per_row + b * per_row + k];
      for (int64_t x = 0; x < gallery.size(0); ++x) {
        smallest = std::min(smallest,
                            std::fabs(own - to_gallery[(b * per_row + k) * gallery.size(0) + x]));
      }
    }
  }
  return smallest;
}

// The constants of a random case: gallery [NX, D]; B x 2 rows `grouped` (QA candidates, CA
// queries, MTAX targets), CA's query_gallery for them, one target per row; labels of 3 classes
// round robin; query b's clean copy at gallery row b for even b, none for odd b.
struct Constants {
  Tensor gallery, grouped, query_gallery, targets;
  std::vector<int64_t> gallery_labels, labels, self;

  Constants to(engine::DType dtype, engine::Device device) const {
    Constants c = *this;
    for (Tensor* t : {&c.gallery, &c.grouped, &c.query_gallery, &c.targets}) {
      *t = t->to(dtype).to(device);
    }
    return c;
  }
};

Constants random_case(int64_t batch, int64_t items, int64_t width, Metric metric, uint64_t seed) {
  Constants c;
  c.gallery = losses::embed_for_metric(random_constant({items, width}, seed), metric);
  Tensor others = losses::embed_for_metric(random_constant({batch * 2, width}, seed + 1), metric);
  c.grouped = others.reshape({batch, 2, width});
  c.query_gallery = losses::distance_matrix(others, c.gallery, metric).reshape({batch, 2, items});
  c.targets = c.grouped.select(1, 0).contiguous();
  for (int64_t x = 0; x < items; ++x) c.gallery_labels.push_back(x % 3);
  for (int64_t b = 0; b < batch; ++b) {
    c.labels.push_back(b % 3);
    c.self.push_back(b % 2 == 0 ? b : -1);
  }
  return c;
}

// Every objective as a function of the perturbed embeddings (already embedded for the metric).
struct Objective {
  const char* name;
  std::function<Tensor(const Tensor&)> loss;
};

std::vector<Objective> every_objective(const Constants& c, Metric metric) {
  const Tensor first = c.grouped.slice(1, 0, 1);  // GTT's single candidate
  auto ltm = [=](bool include_self) {
    return [=](const Tensor& e) {
      return attacks::learning_to_misrank_loss(e, c.gallery, c.gallery_labels, c.labels, c.self,
                                               metric, include_self);
    };
  };
  auto ca = [=](bool raise) {
    return [=](const Tensor& e) {
      return attacks::candidate_attack_loss(e, c.grouped, c.query_gallery, metric, raise);
    };
  };
  auto qa = [=](const Tensor& candidates, bool raise) {
    return [=](const Tensor& e) {
      return attacks::query_attack_loss(e, candidates, c.gallery, metric, raise);
    };
  };
  return {
      {"CA+", ca(true)},
      {"CA-", ca(false)},
      {"QA+", qa(c.grouped, true)},
      {"QA-", qa(c.grouped, false)},
      {"GTT", qa(first, false)},
      {"TMA", [=](const Tensor& e) { return attacks::targeted_mismatch_loss(e, c.targets); }},
      {"ES", [=](const Tensor& e) { return attacks::embedding_shift_loss(e, c.targets, metric); }},
      {"LTM", ltm(false)},
      {"LTM robrank", ltm(true)},
      {"GTM",
       [=](const Tensor& e) { return attacks::greedy_top1_misrank_loss(e, c.targets, metric); }},
      {"STAX",
       [=](const Tensor& e) { return attacks::feature_targeted_loss(e, c.targets.unsqueeze(1)); }},
      {"MTAX", [=](const Tensor& e) { return attacks::feature_targeted_loss(e, c.grouped); }},
  };
}

// LTM's smallest margin, measured independently: the farthest negative's lead over the
// runner-up, the nearest positive's, and |hinge|. Its gradient is valid only away from 0.
double misrank_margin(const Tensor& rows, const Constants& c, Metric metric,
                      bool include_self = false) {
  const int64_t items = c.gallery.size(0);
  const std::vector<double> d = losses::distance_matrix(rows, c.gallery, metric).to_vector();
  double margin = INFINITY;
  for (int64_t b = 0; b < rows.size(0); ++b) {
    std::vector<double> negatives, positives;  // negated distances, distances
    for (int64_t x = 0; x < items; ++x) {
      if (c.gallery_labels[x] != c.labels[b])
        negatives.push_back(-d[b * items + x]);
      else if (x != c.self[b] || include_self)
        positives.push_back(d[b * items + x]);
    }
    if (negatives.empty() || positives.empty()) continue;
    std::sort(negatives.begin(), negatives.end());
    std::sort(positives.begin(), positives.end());
    if (negatives.size() > 1) margin = std::min(margin, negatives[1] - negatives[0]);
    if (positives.size() > 1) margin = std::min(margin, positives[1] - positives[0]);
    margin = std::min(margin, std::fabs(-negatives[0] - positives[0]));
  }
  return margin;
}

}  // namespace

TEST_CASE("gallery distance: the GEMM form matches the pairwise op away from 0", "[attacks]") {
  Tensor queries = random_constant({5, 7}, 1), gallery = random_constant({11, 7}, 2);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    Tensor q = losses::embed_for_metric(queries, metric);
    Tensor x = losses::embed_for_metric(gallery, metric);
    test::require_close(attacks::gallery_distance(q, x, metric),
                        losses::distance_matrix(q, x, metric), 1e-12, 1e-12, "f64");
    test::require_close(
        attacks::gallery_distance(q.to(engine::DType::F32), x.to(engine::DType::F32), metric),
        losses::distance_matrix(q, x, metric), 2e-6, 2e-6, "f32");
  }
  // A query on a gallery row: |q|^2 + |x|^2 - 2<q, x> = 0 is floored at 1e-12, so the distance
  // is 1e-6 and the gradient 0, not NaN: (3, 4) vs (3, 4) and (0, 1) -> 1e-6 and sqrt(18).
  Tensor q = f64({3, 4}, {1, 2}).set_requires_grad(true);
  Tensor d = attacks::gallery_distance(q, f64({3, 4, 0, 1}, {2, 2}), Metric::E);
  test::require_close(d, {1e-6, std::sqrt(18.0)}, 1e-15, 1e-12, "floor");
  // d/dq of (1e-6 + |q - (0, 1)|) = (q - (0, 1)) / sqrt(18) = (3, 3) / sqrt(18).
  Tensor g = engine::grad({engine::sum(d)}, {q})[0];
  test::require_close(g, {3 / std::sqrt(18.0), 3 / std::sqrt(18.0)}, 1e-12, 0, "grad");
}

TEST_CASE("gallery distance grad: N, E and C", "[attacks][grad]") {
  Tensor gallery = random_constant({6, 3}, 4);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    Tensor q = test::random_leaf({3, 3}, 3);
    Tensor x = losses::embed_for_metric(gallery, metric);
    test::require_gradcheck(
        [&](const std::vector<Tensor>& in) {
          return attacks::gallery_distance(losses::embed_for_metric(in[0], metric), x, metric);
        },
        {q});
  }
}

TEST_CASE("CA+ and CA- objective: hand-computed 1-D case, metric E", "[attacks]") {
  // c~ = 0, queries q1 = 1, q2 = 3, gallery {0.5, 2.5, 4}: d(x, q1) = 0.5, 1.5, 3;
  // d(x, q2) = 2.5, 0.5, 1; d(c~, q1) = 1, d(c~, q2) = 3.
  // CA+ [d(c~,q) - d(x,q)]_+: q1 -> 0.5, 0, 0; q2 -> 0.5, 2.5, 2: 5.5 / 6 = 0.9166667.
  // CA- [d(x,q) - d(c~,q)]_+: q1 -> 0, 0.5, 2; q2 -> 0, 0, 0:      2.5 / 6 = 0.4166667.
  Tensor candidate = f64({0}, {1, 1});
  Tensor queries = f64({1, 3}, {1, 2, 1});
  Tensor query_gallery = f64({0.5, 1.5, 3, 2.5, 0.5, 1}, {1, 2, 3});
  CHECK(attacks::candidate_attack_loss(candidate, queries, query_gallery, Metric::E, true).item() ==
        Approx(5.5 / 6).margin(1e-12));
  CHECK(
      attacks::candidate_attack_loss(candidate, queries, query_gallery, Metric::E, false).item() ==
      Approx(2.5 / 6).margin(1e-12));
}

TEST_CASE("CA+ and CA- objective: hand-computed 2-D case, metric N", "[attacks]") {
  // c~ = (1, 0), q = (0.6, 0.8): d = sqrt(0.4^2 + 0.8^2) = sqrt(0.8) = 0.8944272; the constant
  // d(x, q) = 0.5, 1.2. CA+: [0.894427 - 0.5]_+ + 0 = 0.3944272, / 2 = 0.1972136.
  // CA-: 0 + [1.2 - 0.894427]_+ = 0.3055728, / 2 = 0.1527864.
  Tensor candidate = f64({1, 0}, {1, 2});
  Tensor queries = f64({0.6, 0.8}, {1, 1, 2});
  Tensor query_gallery = f64({0.5, 1.2}, {1, 1, 2});
  const double d = std::sqrt(0.8);
  CHECK(attacks::candidate_attack_loss(candidate, queries, query_gallery, Metric::N, true).item() ==
        Approx((d - 0.5) / 2).margin(1e-12));
  CHECK(
      attacks::candidate_attack_loss(candidate, queries, query_gallery, Metric::N, false).item() ==
      Approx((1.2 - d) / 2).margin(1e-12));
}

TEST_CASE("QA+ and QA- objective: hand-computed 1-D case, metric E", "[attacks]") {
  // q~ = 0, candidates c1 = 1, c2 = -2, gallery {1, -2, 0.5, 3}: d(q~, x) = 1, 2, 0.5, 3.
  // QA+ [d(q,c) - d(q,x)]_+: c1 -> 0, 0, 0.5, 0; c2 -> 1, 0, 1.5, 0: 3 / 8 = 0.375.
  // QA- [d(q,x) - d(q,c)]_+: c1 -> 0, 1, 0, 2;   c2 -> 0, 0, 0, 1:   4 / 8 = 0.5.
  Tensor query = f64({0}, {1, 1});
  Tensor candidates = f64({1, -2}, {1, 2, 1});
  Tensor gallery = f64({1, -2, 0.5, 3}, {4, 1});
  CHECK(attacks::query_attack_loss(query, candidates, gallery, Metric::E, true).item() ==
        Approx(0.375).margin(1e-12));
  CHECK(attacks::query_attack_loss(query, candidates, gallery, Metric::E, false).item() ==
        Approx(0.5).margin(1e-12));
}

TEST_CASE("QA+ and QA- objective: hand-computed 2-D case, metric C, two queries", "[attacks]") {
  // Gallery (1, 1), (1, 0), (-1, 0). q1 = (1, 0) with c = (1, 1); q2 = (0, 2) with c = (1, 0).
  // q1: d(x) = 1 - 1/sqrt2 = 0.2928932, 0, 2; d(c) = 0.2928932.
  //   QA+: 0, 0.2928932, 0. QA-: 0, 0, 2 - 0.2928932 = 1.7071068.
  // q2: d(x) = 0.2928932, 1, 1; d(c) = 1.
  //   QA+: 1 - 0.2928932 = 0.7071068, 0, 0. QA-: 0, 0, 0.
  // QA+ = (0.2928932 + 0.7071068) / 6 = 1/6; QA- = 1.7071068 / 6 = 0.2845178.
  Tensor queries = f64({1, 0, 0, 2}, {2, 2});
  Tensor candidates = f64({1, 1, 1, 0}, {2, 1, 2});
  Tensor gallery = f64({1, 1, 1, 0, -1, 0}, {3, 2});
  CHECK(attacks::query_attack_loss(queries, candidates, gallery, Metric::C, true).item() ==
        Approx(1.0 / 6).margin(1e-12));
  CHECK(attacks::query_attack_loss(queries, candidates, gallery, Metric::C, false).item() ==
        Approx((1 + 1 / std::sqrt(2.0)) / 6).margin(1e-12));
  // f32 gives the same numbers.
  Tensor q32 = queries.to(engine::DType::F32), c32 = candidates.to(engine::DType::F32);
  CHECK(attacks::query_attack_loss(q32, c32, gallery.to(engine::DType::F32), Metric::C, false)
            .item() == Approx((1 + 1 / std::sqrt(2.0)) / 6).margin(1e-6));
}

TEST_CASE("GTT objective: QA- with the nearest item, hand-computed 1-D case", "[attacks]") {
  // q~ = 0, t1 = 0.5, gallery {0.5, -1, 0.2, 3}: d = 0.5, 1, 0.2, 3.
  // [d(q,x) - 0.5]_+ = 0, 0.5, 0, 2.5: 3 / 4 = 0.75.
  Tensor loss = attacks::query_attack_loss(f64({0}, {1, 1}), f64({0.5}, {1, 1, 1}),
                                           f64({0.5, -1, 0.2, 3}, {4, 1}), Metric::E, false);
  CHECK(loss.item() == Approx(0.75).margin(1e-12));
}

TEST_CASE("SP-QA weight: exp(zeta L) clamped at 1e9, detached, on the loss's device", "[attacks]") {
  // exp(2 * 0.5) = e; exp(4e4 * 3e-4) = exp(12) = 162754.791419; exp(1e4 * 1) overflows -> 1e9.
  Tensor sp = f64({0.5}, {}).set_requires_grad(true);
  Tensor xi = attacks::semantic_preserving_weight(sp, 2.0);
  CHECK(xi.item() == Approx(std::exp(1.0)).epsilon(1e-14));
  CHECK_FALSE(xi.requires_grad());
  CHECK(xi.dtype() == engine::DType::F64);
  CHECK(attacks::semantic_preserving_weight(f64({3e-4}, {}), 4e4).item() ==
        Approx(162754.791419).epsilon(1e-9));
  CHECK(attacks::semantic_preserving_weight(f64({1.0}, {}), 1e4).item() == 1e9);
  Tensor f32_loss = Tensor::scalar(0.01, engine::DType::F32);
  CHECK(attacks::semantic_preserving_weight(f32_loss, 4e4).item() == 1e9);  // exp(400) = inf
  CHECK(attacks::semantic_preserving_weight(f32_loss, 1.0).item() ==
        Approx(std::exp(0.01)).epsilon(1e-6));
}

TEST_CASE("QA objective from shared distances equals the self-contained one", "[attacks][grad]") {
  // SP-QA computes gallery_distance once per step for both of its QA terms.
  Tensor gallery = random_constant({9, 3}, 21);
  Tensor candidates = random_constant({2, 2, 3}, 22);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    for (bool raise : {true, false}) {
      INFO(losses::metric_name(metric) << (raise ? " QA+" : " QA-"));
      Tensor q = test::random_leaf({2, 3}, 23);
      Tensor direct = attacks::query_attack_loss(q, candidates, gallery, metric, raise);
      Tensor shared = attacks::query_attack_loss_from_distances(
          q, candidates, attacks::gallery_distance(q, gallery, metric), metric, raise);
      CHECK(shared.item() == direct.item());
      CHECK(engine::grad({shared}, {q})[0].to_vector() ==
            engine::grad({direct}, {q})[0].to_vector());
    }
  }
  REQUIRE_THROWS_WITH(attacks::query_attack_loss_from_distances(
                          test::random_leaf({2, 3}, 24), candidates, gallery, Metric::E, true),
                      Catch::Contains("query-gallery distances"));
}

TEST_CASE("SP-QA objective grad: the weight xi is not differentiated", "[attacks][grad]") {
  // L = QA-(q~) + xi * QA+(q~, refs): its gradient must be grad QA- + xi * grad QA+ with xi a
  // number, not the product rule's extra SP * grad xi.
  Tensor gallery = random_constant({9, 3}, 11);
  Tensor candidates = random_constant({2, 1, 3}, 12), references = random_constant({2, 2, 3}, 13);
  Tensor q = test::random_leaf({2, 3}, 14);
  auto qa = [&](const Tensor& c, bool raise) {
    return attacks::query_attack_loss(q, c, gallery, Metric::E, raise);
  };
  Tensor sp = qa(references, true);
  REQUIRE(sp.item() > 0.01);  // a non-trivial SP term, so a wrongly differentiated xi would show
  Tensor xi = attacks::semantic_preserving_weight(sp, 3.0);
  Tensor total = qa(candidates, false) + xi * sp;
  std::vector<double> got = engine::grad({total}, {q})[0].to_vector();
  std::vector<double> lower = engine::grad({qa(candidates, false)}, {q})[0].to_vector();
  std::vector<double> raise = engine::grad({qa(references, true)}, {q})[0].to_vector();
  std::vector<double> expected(got.size());
  for (size_t i = 0; i < got.size(); ++i) expected[i] = lower[i] + xi.item() * raise[i];
  test::require_close(got, expected, 1e-12, 1e-12, "SP-QA gradient");
}

TEST_CASE("SP-QA's xi is per query (the paper) or from the batch means (robrank): hand-computed",
          "[attacks]") {
  // qa = (0.1, 0.2), sp = (0.001, 0.0001), zeta = 1000: xi = exp(1) and exp(0.1).
  //   per query: ((0.1 + e 0.001) + (0.2 + e^0.1 0.0001)) / 2
  //   batch:     0.15 + exp(1000 0.00055) 0.00055 = 0.15 + e^0.55 0.00055
  const Tensor qa = f64({0.1, 0.2}, {2}), sp = f64({0.001, 0.0001}, {2});
  const double per_query = (0.1 + std::exp(1.0) * 0.001 + 0.2 + std::exp(0.1) * 0.0001) / 2;
  CHECK(attacks::semantic_preserving_query_loss(qa, sp, 1000.0, false).item() ==
        Approx(per_query).epsilon(1e-14));
  CHECK(attacks::semantic_preserving_query_loss(qa, sp, 1000.0, true).item() ==
        Approx(0.15 + std::exp(0.55) * 0.00055).epsilon(1e-14));
}

TEST_CASE("SP-QA per query: one query's gradient does not depend on another query's references",
          "[attacks][grad]") {
  // Query 1's references sit far from it (large L_SP, xi saturating) in one batch and next to it
  // in the other; query 0's gradient must be the same in both batches with the per-query xi,
  // and it changes with robrank's batch xi (which is why that is only the --robrank-compat form).
  const Tensor gallery = random_constant({9, 3}, 31);
  const Tensor candidates = random_constant({2, 1, 3}, 32);
  const Tensor q_values = random_constant({2, 3}, 33);
  const std::vector<double> qv = q_values.to_vector();
  auto query0_gradient = [&](const Tensor& references, bool batch_xi) {
    Tensor q = f64(qv, {2, 3}).set_requires_grad(true);
    const Tensor to_gallery = attacks::gallery_distance(q, gallery, Metric::E);
    const Tensor loss = attacks::semantic_preserving_query_loss(
        attacks::query_attack_rows_from_distances(q, candidates, to_gallery, Metric::E, false),
        attacks::query_attack_rows_from_distances(q, references, to_gallery, Metric::E, true), 4.0,
        batch_xi);
    std::vector<double> g = engine::grad({loss}, {q})[0].to_vector();
    g.resize(3);  // query 0's row
    return g;
  };
  // Query 0's references are the same in both, about 2 away so gallery rows are nearer (its
  // L_SP and its gradient are not 0); query 1's sit on it (near) or 5 further out (far).
  std::vector<double> near = {qv[0] + 1.5, qv[1] + 1.5, qv[2], qv[0] - 1.5, qv[1], qv[2] + 1.5,
                              qv[3],       qv[4],       qv[5], qv[3],       qv[4], qv[5]};
  std::vector<double> far = near;
  for (size_t i = 6; i < 12; ++i) far[i] += 5.0;
  const Tensor refs_near = f64(near, {2, 2, 3}), refs_far = f64(far, {2, 2, 3});
  const Tensor to_gallery = attacks::gallery_distance(f64(qv, {2, 3}), gallery, Metric::E);
  const std::vector<double> sp = attacks::query_attack_rows_from_distances(
                                     f64(qv, {2, 3}), refs_near, to_gallery, Metric::E, true)
                                     .to_vector();
  REQUIRE(sp[0] > 0.01);  // query 0's SP term is active, so a batch-wide xi would show
  test::require_close(query0_gradient(refs_far, false), query0_gradient(refs_near, false), 1e-15,
                      1e-13, "per-query xi: query 0's gradient");
  const std::vector<double> batch_near = query0_gradient(refs_near, true);
  const std::vector<double> batch_far = query0_gradient(refs_far, true);
  double largest_change = 0.0;
  for (size_t i = 0; i < 3; ++i) {
    largest_change = std::max(largest_change, std::abs(batch_far[i] - batch_near[i]));
  }
  CHECK(largest_change > 1e-3);
}

TEST_CASE("TMA, ES, GTM, STAX and MTAX objective: hand-computed 2-D cases", "[attacks]") {
  Tensor q = f64({3, 4, 1, 0}, {2, 2});
  // TMA: cos((3,4), (4,-3)) = 0 -> 1; cos((1,0), (1,1)) = 0.7071068 -> 0.2928932; mean 0.6464466.
  CHECK(attacks::targeted_mismatch_loss(q, f64({4, -3, 1, 1}, {2, 2})).item() ==
        Approx((1 + 1 - 1 / std::sqrt(2.0)) / 2).margin(1e-12));
  // ES, E: row distances |(3,4) - (0,0) + 1e-6| = 5.0000014 and |(1,0) - (1,2) + 1e-6| =
  // |(1e-6, -2 + 1e-6)| = 1.999999; -(mean) = -3.5000002 (the 1e-6 is robrank's pairwise eps).
  Tensor clean = f64({0, 0, 1, 2}, {2, 2});
  CHECK(attacks::embedding_shift_loss(q, clean, Metric::E).item() ==
        Approx(-3.5000002).margin(1e-9));
  // ES, C: 1 - cos((3,4), (4,3)) = 1 - 24/25 = 0.04; 1 - cos((1,0), (0,1)) = 1: -(0.52).
  CHECK(attacks::embedding_shift_loss(q, f64({4, 3, 0, 1}, {2, 2}), Metric::C).item() ==
        Approx(-0.52).margin(1e-12));
  // GTM, N on unit rows: |(0.6,0.8) - (0.8,0.6) + 1e-6| = sqrt(0.08) = 0.2828427 and
  // |(1,0) - (0,1) + 1e-6| = sqrt(2) = 1.4142136: mean 0.8485281.
  Tensor unit = f64({0.6, 0.8, 1, 0}, {2, 2});
  CHECK(attacks::greedy_top1_misrank_loss(unit, f64({0.8, 0.6, 0, 1}, {2, 2}), Metric::N).item() ==
        Approx((std::sqrt(0.08) + std::sqrt(2.0)) / 2).margin(2e-6));
  // GTM, E: |(3,4) - (3,0)| = 4, |(1,0) - (1,2)| = 2 (+ ~1e-6 each): mean 3.
  CHECK(attacks::greedy_top1_misrank_loss(q, f64({3, 0, 1, 2}, {2, 2}), Metric::E).item() ==
        Approx(3.0).margin(2e-6));
  // STAX (T = 1): ||(3,4) - (0,0)||^2 = 25, ||(1,0) - (1,2)||^2 = 4: mean 14.5.
  CHECK(attacks::feature_targeted_loss(q, f64({0, 0, 1, 2}, {2, 1, 2})).item() ==
        Approx(14.5).margin(1e-12));
  // MTAX (T = 2): row 0 targets (3,0), (0,0): (16 + 25)/2 = 20.5; row 1 targets (1,1), (2,0):
  // (1 + 1)/2 = 1. Mean 10.75.
  CHECK(attacks::feature_targeted_loss(q, f64({3, 0, 0, 0, 1, 1, 2, 0}, {2, 2, 2})).item() ==
        Approx(10.75).margin(1e-12));
}

TEST_CASE("LTM objective: hand-computed 1-D case, self copy excluded or kept (robrank)",
          "[attacks]") {
  // Gallery x0 = 0 (label 0, query 0's clean copy), x1 = 0.3 (0), x2 = -1 (1), x3 = 2 (1),
  // x4 = 0.2 (1). Query 0: q~ = 0.05, label 0: d = 0.05, 0.25, 1.05, 1.95, 0.15.
  //   Farthest negative x3: 1.95. Nearest positive without self x1: 0.25 -> 1.95 - 0.25 = 1.7;
  //   with the self copy x0 (robrank's unapplied mask): 0.05 -> 1.9.
  // Query 1: q~ = 1, label 2: no gallery item of class 2, no positive -> 0.
  // Means over the 2 queries: 0.85 and 0.95.
  Tensor queries = f64({0.05, 1}, {2, 1});
  Tensor gallery = f64({0, 0.3, -1, 2, 0.2}, {5, 1});
  const std::vector<int64_t> gallery_labels{0, 0, 1, 1, 1}, labels{0, 2}, self{0, -1};
  CHECK(attacks::learning_to_misrank_loss(queries, gallery, gallery_labels, labels, self, Metric::E,
                                          false)
            .item() == Approx(0.85).margin(1e-12));
  CHECK(attacks::learning_to_misrank_loss(queries, gallery, gallery_labels, labels, self, Metric::E,
                                          true)
            .item() == Approx(0.95).margin(1e-12));
  // q~ = 0.3 on x1, label 0, not in the gallery (self -1): d = 0.3, 0, 1.3, 1.7, 0.1. Farthest
  // negative x3 at 1.7, nearest positive x1 at 0, floored to sqrt(1e-12) = 1e-6: 1.7 - 1e-6.
  CHECK(attacks::learning_to_misrank_loss(f64({0.3}, {1, 1}), gallery, gallery_labels, {0}, {-1},
                                          Metric::E, false)
            .item() == Approx(1.7 - 1e-6).margin(1e-12));
  // An already misranked query: gallery {0 (label 0), 0.1 (0), 1 (1)}, q~ = 1.05 of class 0: the
  // only negative at 0.05 is nearer than the nearest positive at 0.95: [0.05 - 0.95]_+ = 0.
  CHECK(attacks::learning_to_misrank_loss(f64({1.05}, {1, 1}), f64({0, 0.1, 1}, {3, 1}), {0, 0, 1},
                                          {0}, {-1}, Metric::E, false)
            .item() == 0.0);
}

TEST_CASE("every objective grad: N, E and C away from kinks and argmax switches",
          "[attacks][grad]") {
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    const Constants c = random_case(3, 10, 4, metric, 31);
    Tensor leaf = test::random_leaf({3, 4}, 33);
    // Hinges and LTM's farthest negative / nearest positive must be > 1e-3 from a switch, or
    // finite differences would cross it.
    const Tensor rows = losses::embed_for_metric(leaf.detach(), metric);
    REQUIRE(smallest_gap(rows, c.grouped, c.gallery, metric) > 1e-3);
    REQUIRE(misrank_margin(rows, c, metric, false) > 1e-3);
    REQUIRE(misrank_margin(rows, c, metric, true) > 1e-3);
    for (const Objective& objective : every_objective(c, metric)) {
      INFO("metric " << losses::metric_name(metric) << " objective " << objective.name);
      test::require_gradcheck(
          [&](const std::vector<Tensor>& in) {
            return objective.loss(losses::embed_for_metric(in[0], metric));
          },
          {leaf});
    }
  }
}

TEST_CASE("every objective: only the perturbed embeddings get a gradient; f32 equals f64",
          "[attacks]") {
  // Gallery, queries, candidates and targets are plain constants (no requires_grad): backward
  // reaches the perturbed embeddings only, and the f32 value matches the f64 one.
  const Constants f64_case = random_case(2, 7, 3, Metric::N, 41);
  Tensor leaf64 = random_constant({2, 3}, 43);
  for (engine::DType dtype : {engine::DType::F64, engine::DType::F32}) {
    INFO("dtype " << engine::dtype_name(dtype));
    const Constants c = f64_case.to(dtype, engine::Device::cpu());
    const auto objectives = every_objective(c, Metric::N);
    const auto exact = every_objective(f64_case, Metric::N);
    for (size_t i = 0; i < objectives.size(); ++i) {
      INFO("objective " << objectives[i].name);
      Tensor leaf = leaf64.to(dtype).detach().set_requires_grad(true);
      Tensor loss = objectives[i].loss(losses::embed_for_metric(leaf, Metric::N));
      REQUIRE(loss.shape() == engine::Shape{});
      REQUIRE(loss.requires_grad());
      engine::backward(loss);
      REQUIRE(leaf.grad().defined());
      for (double v : leaf.grad().to_vector()) CHECK(std::isfinite(v));
      for (const Tensor& constant : {c.gallery, c.grouped, c.query_gallery, c.targets}) {
        CHECK_FALSE(constant.requires_grad());
        CHECK_FALSE(constant.grad().defined());
      }
      // f32 rounding of distances of order 1 is ~1e-7 per term; these means are of order 1.
      CHECK(loss.item() ==
            Approx(exact[i].loss(losses::embed_for_metric(leaf64, Metric::N)).item()).margin(1e-5));
    }
  }
}

TEST_CASE("every objective cuda: matches cpu on odd shapes", "[attacks][cuda]") {
  // The objectives are compositions of engine ops: on CUDA tensors they run the ops' kernels.
  // Value and input gradient (f32) against the CPU on the same data. The data is checked first
  // (on the host, in f64: also without a GPU) to keep every hinge and LTM's argmax/argmin 1e-5
  // away from a switch, far above f32 rounding, so both devices take the same branches.
  struct Config {
    int64_t batch, items, width;
    Metric metric;
  };
  std::vector<Config> configs;
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    for (Config shape : {Config{1, 5, 3, metric}, {3, 33, 19, metric}, {17, 130, 7, metric}}) {
      configs.push_back(shape);
    }
  }
  auto leaf_of = [](const Config& k) { return random_constant({k.batch, k.width}, 90 + k.items); };
  auto case_of = [](const Config& k) {
    return random_case(k.batch, k.items, k.width, k.metric, 50 + k.items);
  };
  for (const Config& k : configs) {
    INFO(k.batch << " x " << k.items << " x " << k.width << " " << losses::metric_name(k.metric));
    const Tensor rows = losses::embed_for_metric(leaf_of(k), k.metric);
    REQUIRE(smallest_gap(rows, case_of(k).grouped, case_of(k).gallery, k.metric) > 1e-5);
    REQUIRE(misrank_margin(rows, case_of(k), k.metric, false) > 1e-5);
    REQUIRE(misrank_margin(rows, case_of(k), k.metric, true) > 1e-5);
  }
  REQUIRE_CUDA_OR_SKIP();
  const engine::Device cuda = engine::Device::cuda(), cpu = engine::Device::cpu();
  for (const Config& k : configs) {
    INFO(k.batch << " x " << k.items << " x " << k.width << " " << losses::metric_name(k.metric));
    const Constants c = case_of(k);
    const auto on_host = every_objective(c.to(engine::DType::F32, cpu), k.metric);
    const auto on_device = every_objective(c.to(engine::DType::F32, cuda), k.metric);
    const test::Tolerance tol = test::reduction_tolerance(k.items * k.width);
    for (size_t i = 0; i < on_host.size(); ++i) {
      INFO("objective " << on_host[i].name);
      Tensor x = leaf_of(k).to(engine::DType::F32).detach().set_requires_grad(true);
      Tensor y = x.detach().to(cuda).detach().set_requires_grad(true);
      Tensor host_loss = on_host[i].loss(losses::embed_for_metric(x, k.metric));
      Tensor device_loss = on_device[i].loss(losses::embed_for_metric(y, k.metric));
      REQUIRE(device_loss.device().is_cuda());
      test::require_close(device_loss.to(cpu), host_loss, tol.atol, tol.rtol, "value");
      test::require_close(engine::grad({device_loss}, {y})[0].to(cpu),
                          engine::grad({host_loss}, {x})[0], tol.atol, tol.rtol, "gradient");
    }
  }
}

TEST_CASE("objectives: bad shapes are named errors", "[attacks]") {
  Tensor q = f64({0, 1, 2, 3}, {2, 2});
  REQUIRE_THROWS_WITH(attacks::query_attack_loss(q, f64({0, 1}, {1, 1, 2}), q, Metric::E, true),
                      Catch::Contains("query_attack_loss") && Catch::Contains("candidates"));
  REQUIRE_THROWS_WITH(attacks::gallery_distance(q, f64({0, 1, 2}, {1, 3}), Metric::E),
                      Catch::Contains("gallery_distance") && Catch::Contains("[1, 3]"));
  REQUIRE_THROWS_WITH(attacks::candidate_attack_loss(q, f64({0, 1, 2, 3}, {2, 1, 2}),
                                                     f64({0, 1, 2, 3}, {2, 2, 1}), Metric::E, true),
                      Catch::Contains("candidate_attack_loss") && Catch::Contains("query_gallery"));
  REQUIRE_THROWS_WITH(
      attacks::learning_to_misrank_loss(q, q, {0, 1}, {0}, {-1, -1}, Metric::E, false),
      Catch::Contains("learning_to_misrank_loss"));
  REQUIRE_THROWS_WITH(
      attacks::learning_to_misrank_loss(q, q, {0, 1}, {0, 1}, {-1, 2}, Metric::E, false),
      Catch::Contains("self index 2"));
  REQUIRE_THROWS_WITH(attacks::feature_targeted_loss(q, q),
                      Catch::Contains("feature_targeted_loss"));
  REQUIRE_THROWS_WITH(attacks::semantic_preserving_weight(Tensor(), 1.0),
                      Catch::Contains("semantic_preserving_weight"));
  REQUIRE_THROWS_WITH(attacks::semantic_preserving_query_loss(q, q, 1.0, false),
                      Catch::Contains("semantic_preserving_query_loss"));
}
