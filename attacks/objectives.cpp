// The ranking attacks' objectives (math and conventions in objectives.h), built from engine ops so
// autograd provides the gradient with respect to the perturbed embeddings.
//
// Query-vs-gallery distances go through one GEMM (gallery_distance): for N and E
//   d(q, x) = sqrt(max(|q|^2 + |x|^2 - 2 <q, x>, 1e-12)),
// for C 1 - <q, x> / (|q| |x|). The per-row distances that are compared against those in a hinge
// (d(q~, c) in QA, d(c~, q) in CA, LTM's selected pairs) use the same formula, so an item compared
// with itself ties exactly up to the GEMM's summation order.
#include "attacks/objectives.h"

#include <limits>
#include <string>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "kernels/common/check.h"

namespace attacks {
namespace {

using engine::Tensor;

// The floor under the squared Euclidean distance. |q|^2 + |x|^2 - 2 <q, x> cancels to about 0
// (or slightly below) when q~ sits on its own clean copy; the floor keeps sqrt's gradient finite
// (the clamp passes no gradient below it, so it is 0 there, not NaN). torch.cdist, which robrank
// uses, computes large inputs with this same Gram expansion.
constexpr double kSquaredDistanceFloor = 1e-12;

std::string describe(const Tensor& t) { return t.defined() ? t.str() : "undefined"; }

void check_matrix(const Tensor& t, const char* op, const char* name) {
  ENGINE_CHECK(t.defined() && t.dim() == 2 && engine::is_floating(t.dtype()), op, ": expected ",
               name, " as a floating-point [rows, D] tensor, got ", describe(t));
  ENGINE_CHECK(t.size(0) >= 1 && t.size(1) >= 1, op, ": ", name, " is empty ",
               engine::shape_str(t.shape()));
}

// rows [B, D] (the first, differentiable argument) and others [B, K, D].
void check_grouped(const Tensor& rows, const Tensor& others, const char* op, const char* name) {
  check_matrix(rows, op, "the perturbed embeddings");
  ENGINE_CHECK(others.defined() && others.dim() == 3 && others.size(0) == rows.size(0) &&
                   others.size(1) >= 1 && others.size(2) == rows.size(1),
               op, ": expected ", name, " [", rows.size(0), ", K, ", rows.size(1),
               "] for perturbed embeddings ", engine::shape_str(rows.shape()), ", got ",
               describe(others));
}

void check_same_shape(const Tensor& rows, const Tensor& others, const char* op, const char* name) {
  check_matrix(rows, op, "the perturbed embeddings");
  ENGINE_CHECK(others.defined() && others.shape() == rows.shape(), op, ": expected ", name, " ",
               engine::shape_str(rows.shape()), " like the perturbed embeddings, got ",
               describe(others));
}

Tensor squared_norms(const Tensor& x, int64_t dim) { return engine::sum(x * x, {dim}); }

// |x_i|^2 of the rows of x [N, D] as [N, 1]: the squared distance to the origin, one pass over x
// without the [N, D] temporary of x * x (about 3x faster for a 10,000 x 512 gallery on the CPU).
Tensor row_squared_norms(const Tensor& x) {
  const Tensor origin = Tensor::zeros({1, x.size(1)}, x.dtype(), x.device());
  return engine::pairwise_distance(x, origin, engine::DistanceMetric::SquaredEuclidean);
}

// d(rows_b, items_bk) -> [B, K] with gallery_distance's formula. rows [B, D], items [B, K, D].
Tensor grouped_distance(const Tensor& rows, const Tensor& items, Metric metric) {
  const int64_t batch = items.size(0), per_row = items.size(1), dim = items.size(2);
  if (metric == Metric::C) {
    const Tensor unit_rows = engine::l2_normalize(rows).unsqueeze(1);  // [B, 1, D]
    const Tensor unit_items =
        engine::l2_normalize(items.reshape({batch * per_row, dim})).reshape({batch, per_row, dim});
    return engine::add_scalar(-engine::sum(unit_rows * unit_items, {2}), 1.0);
  }
  const Tensor dots = engine::sum(rows.unsqueeze(1) * items, {2});  // [B, K]
  const Tensor squared =
      (squared_norms(rows, 1).unsqueeze(1) + squared_norms(items, 2)) - dots * 2.0;
  return engine::sqrt(
      engine::clamp(squared, kSquaredDistanceFloor, std::numeric_limits<double>::infinity()));
}

}  // namespace

Tensor gallery_distance(const Tensor& queries, const Tensor& gallery, Metric metric) {
  check_matrix(queries, "gallery_distance", "queries");
  check_matrix(gallery, "gallery_distance", "gallery");
  ENGINE_CHECK(queries.size(1) == gallery.size(1),
               "gallery_distance: queries and gallery differ in width: ",
               engine::shape_str(queries.shape()), " and ", engine::shape_str(gallery.shape()));
  const Tensor no_bias;
  if (metric == Metric::C) {
    // 1 - cos through the unit rows: <q/|q|, x/|x|> for every pair is one GEMM.
    const Tensor cosine =
        engine::linear(engine::l2_normalize(queries), engine::l2_normalize(gallery), no_bias);
    return engine::add_scalar(-cosine, 1.0);
  }
  const Tensor dots = engine::linear(queries, gallery, no_bias);  // [B, NX] = Q X^T
  const Tensor squared =
      (row_squared_norms(queries) + row_squared_norms(gallery).reshape({1, gallery.size(0)})) -
      dots * 2.0;
  return engine::sqrt(
      engine::clamp(squared, kSquaredDistanceFloor, std::numeric_limits<double>::infinity()));
}

namespace {

// CA's hinge [B, W, NX] (see objectives.h).
Tensor candidate_attack_hinge(const Tensor& candidates, const Tensor& queries,
                              const Tensor& query_gallery, Metric metric, bool raise,
                              const char* op) {
  check_grouped(candidates, queries, op, "queries");
  ENGINE_CHECK(query_gallery.defined() && query_gallery.dim() == 3 &&
                   query_gallery.size(0) == queries.size(0) &&
                   query_gallery.size(1) == queries.size(1) && query_gallery.size(2) >= 1,
               op, ": expected query_gallery [", queries.size(0), ", ", queries.size(1),
               ", NX] for queries ", engine::shape_str(queries.shape()), ", got ",
               describe(query_gallery));
  const Tensor to_candidate = grouped_distance(candidates, queries, metric).unsqueeze(2);
  // [B, W, NX]: CA+ wants the candidate nearer each query than every x, CA- farther.
  const Tensor gap = raise ? to_candidate - query_gallery : query_gallery - to_candidate;
  return engine::relu(gap);
}

}  // namespace

Tensor candidate_attack_loss(const Tensor& candidates, const Tensor& queries,
                             const Tensor& query_gallery, Metric metric, bool raise) {
  return engine::mean(candidate_attack_hinge(candidates, queries, query_gallery, metric, raise,
                                             "candidate_attack_loss"));
}

Tensor candidate_attack_rows(const Tensor& candidates, const Tensor& queries,
                             const Tensor& query_gallery, Metric metric, bool raise) {
  return engine::mean(candidate_attack_hinge(candidates, queries, query_gallery, metric, raise,
                                             "candidate_attack_rows"),
                      {1, 2});
}

Tensor query_attack_loss(const Tensor& queries, const Tensor& candidates, const Tensor& gallery,
                         Metric metric, bool raise) {
  const char* op = "query_attack_loss";
  check_grouped(queries, candidates, op, "candidates");
  check_matrix(gallery, op, "gallery");
  ENGINE_CHECK(gallery.size(1) == queries.size(1), op, ": gallery ",
               engine::shape_str(gallery.shape()), " differs in width from queries ",
               engine::shape_str(queries.shape()));
  return query_attack_loss_from_distances(
      queries, candidates, gallery_distance(queries, gallery, metric), metric, raise);
}

namespace {

// QA's hinge [B, M, NX] (see objectives.h).
Tensor query_attack_hinge(const Tensor& queries, const Tensor& candidates, const Tensor& to_gallery,
                          Metric metric, bool raise, const char* op) {
  check_grouped(queries, candidates, op, "candidates");
  ENGINE_CHECK(to_gallery.defined() && to_gallery.dim() == 2 &&
                   to_gallery.size(0) == queries.size(0) && to_gallery.size(1) >= 1,
               op, ": expected query-gallery distances [", queries.size(0), ", NX], got ",
               describe(to_gallery));
  const Tensor to_candidates = grouped_distance(queries, candidates, metric).unsqueeze(2);
  // [B, M, NX]: QA+ pulls each candidate ahead of every x, QA- pushes it behind.
  const Tensor gap =
      raise ? to_candidates - to_gallery.unsqueeze(1) : to_gallery.unsqueeze(1) - to_candidates;
  return engine::relu(gap);
}

}  // namespace

Tensor query_attack_loss_from_distances(const Tensor& queries, const Tensor& candidates,
                                        const Tensor& to_gallery, Metric metric, bool raise) {
  return engine::mean(query_attack_hinge(queries, candidates, to_gallery, metric, raise,
                                         "query_attack_loss_from_distances"));
}

Tensor query_attack_rows_from_distances(const Tensor& queries, const Tensor& candidates,
                                        const Tensor& to_gallery, Metric metric, bool raise) {
  return engine::mean(query_attack_hinge(queries, candidates, to_gallery, metric, raise,
                                         "query_attack_rows_from_distances"),
                      {1, 2});
}

Tensor semantic_preserving_weight(const Tensor& sp_loss, double zeta) {
  ENGINE_CHECK(sp_loss.defined() && sp_loss.numel() >= 1 && engine::is_floating(sp_loss.dtype()),
               "semantic_preserving_weight: expected a floating-point loss, got ",
               describe(sp_loss));
  engine::NoGradGuard no_grad;
  // exp overflows to +inf for a large zeta * L (f32 beyond ~88.7); the clamp maps it to 1e9.
  // A NaN loss stays NaN: the objective it weighs is NaN then anyway.
  return engine::clamp(engine::exp(sp_loss.detach() * zeta), 0.0, 1e9);
}

Tensor semantic_preserving_query_loss(const Tensor& qa_rows, const Tensor& sp_rows, double zeta,
                                      bool batch_xi) {
  ENGINE_CHECK(qa_rows.defined() && sp_rows.defined() && qa_rows.dim() == 1 &&
                   qa_rows.shape() == sp_rows.shape(),
               "semantic_preserving_query_loss: expected two [B] rows, got ", describe(qa_rows),
               " and ", describe(sp_rows));
  if (batch_xi) {
    const Tensor sp_mean = engine::mean(sp_rows);
    return engine::mean(qa_rows) + semantic_preserving_weight(sp_mean, zeta) * sp_mean;
  }
  return engine::mean(qa_rows + semantic_preserving_weight(sp_rows, zeta) * sp_rows);
}

Tensor semantic_preserving_query_rows(const Tensor& qa_rows, const Tensor& sp_rows, double zeta,
                                      bool batch_xi) {
  ENGINE_CHECK(qa_rows.defined() && sp_rows.defined() && qa_rows.dim() == 1 &&
                   qa_rows.shape() == sp_rows.shape(),
               "semantic_preserving_query_rows: expected two [B] rows, got ", describe(qa_rows),
               " and ", describe(sp_rows));
  const Tensor xi = batch_xi ? semantic_preserving_weight(engine::mean(sp_rows), zeta)
                             : semantic_preserving_weight(sp_rows, zeta);
  return qa_rows + xi * sp_rows;
}

Tensor targeted_mismatch_loss(const Tensor& queries, const Tensor& targets) {
  check_same_shape(queries, targets, "targeted_mismatch_loss", "targets");
  return engine::mean(losses::row_distance(queries, targets, Metric::C));
}

Tensor embedding_shift_loss(const Tensor& queries, const Tensor& references, Metric metric) {
  check_same_shape(queries, references, "embedding_shift_loss", "references");
  return -engine::mean(losses::row_distance(queries, references, metric));
}

namespace {

// LTM's hinge per query [B, 1] (see objectives.h).
Tensor learning_to_misrank_terms(const Tensor& queries, const Tensor& gallery,
                                 const std::vector<int64_t>& gallery_labels,
                                 const std::vector<int64_t>& query_labels,
                                 const std::vector<int64_t>& self_index, Metric metric,
                                 bool include_self, const char* op) {
  check_matrix(queries, op, "queries");
  check_matrix(gallery, op, "gallery");
  ENGINE_CHECK(gallery.size(1) == queries.size(1), op, ": gallery ",
               engine::shape_str(gallery.shape()), " differs in width from queries ",
               engine::shape_str(queries.shape()));
  const int64_t batch = queries.size(0), items = gallery.size(0);
  ENGINE_CHECK(static_cast<int64_t>(gallery_labels.size()) == items, op, ": ",
               gallery_labels.size(), " gallery labels for a gallery of ", items, " rows");
  ENGINE_CHECK(static_cast<int64_t>(query_labels.size()) == batch &&
                   static_cast<int64_t>(self_index.size()) == batch,
               op, ": expected ", batch, " query labels and self indices, got ",
               query_labels.size(), " and ", self_index.size());

  std::vector<double> distances;
  {
    engine::NoGradGuard no_grad;
    distances = gallery_distance(queries.detach(), gallery, metric).to_vector();
  }
  // Per query: the farthest negative and the nearest positive (ties to the lower index).
  std::vector<int64_t> farthest_negative(batch, 0), nearest_positive(batch, 0);
  std::vector<double> active(batch, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t self = self_index[b];
    ENGINE_CHECK(self >= -1 && self < items, op, ": self index ", self, " of query ", b,
                 " is outside the gallery of ", items, " rows");
    const double* row = distances.data() + b * items;
    int64_t negative = -1, positive = -1;
    for (int64_t x = 0; x < items; ++x) {
      if (gallery_labels[x] != query_labels[b]) {
        if (negative < 0 || row[x] > row[negative]) negative = x;
      } else if (x != self || include_self) {
        if (positive < 0 || row[x] < row[positive]) positive = x;
      }
    }
    if (negative >= 0 && positive >= 0) {
      farthest_negative[b] = negative;
      nearest_positive[b] = positive;
      active[b] = 1.0;
    }
  }

  const engine::Device device = queries.device();
  auto rows_of = [&](const std::vector<int64_t>& index) {
    return engine::index_select(gallery, Tensor::from_indices(index, {batch}, device))
        .unsqueeze(1);  // [B, 1, D]
  };
  const Tensor to_negative = grouped_distance(queries, rows_of(farthest_negative), metric);
  const Tensor to_positive = grouped_distance(queries, rows_of(nearest_positive), metric);
  const Tensor mask = Tensor::from_vector(active, {batch, 1}, queries.dtype(), device);
  // Queries without a negative or a positive count as 0 in the mean over the batch.
  return engine::relu(to_negative - to_positive) * mask;  // [B, 1]
}

}  // namespace

Tensor learning_to_misrank_loss(const Tensor& queries, const Tensor& gallery,
                                const std::vector<int64_t>& gallery_labels,
                                const std::vector<int64_t>& query_labels,
                                const std::vector<int64_t>& self_index, Metric metric,
                                bool include_self) {
  return engine::mean(learning_to_misrank_terms(queries, gallery, gallery_labels, query_labels,
                                                self_index, metric, include_self,
                                                "learning_to_misrank_loss"));
}

Tensor learning_to_misrank_rows(const Tensor& queries, const Tensor& gallery,
                                const std::vector<int64_t>& gallery_labels,
                                const std::vector<int64_t>& query_labels,
                                const std::vector<int64_t>& self_index, Metric metric,
                                bool include_self) {
  return learning_to_misrank_terms(queries, gallery, gallery_labels, query_labels, self_index,
                                   metric, include_self, "learning_to_misrank_rows")
      .reshape({queries.size(0)});
}

Tensor greedy_top1_misrank_loss(const Tensor& queries, const Tensor& targets, Metric metric) {
  check_same_shape(queries, targets, "greedy_top1_misrank_loss", "targets");
  return engine::mean(losses::row_distance(queries, targets, metric));
}

Tensor feature_targeted_loss(const Tensor& queries, const Tensor& targets) {
  check_grouped(queries, targets, "feature_targeted_loss", "targets");
  const Tensor difference = queries.unsqueeze(1) - targets;  // [B, T, D]
  // The mean over [B, T] of the squared norms is mean_b (1/T) sum_j ||q_b - t_bj||^2.
  return engine::mean(engine::sum(difference * difference, {2}));
}

Tensor feature_targeted_rows(const Tensor& queries, const Tensor& targets) {
  check_grouped(queries, targets, "feature_targeted_rows", "targets");
  const Tensor difference = queries.unsqueeze(1) - targets;  // [B, T, D]
  return engine::mean(engine::sum(difference * difference, {2}), {1});
}

}  // namespace attacks
