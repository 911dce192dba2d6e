// Generalized lifted-structure loss (math in lifted.h): the anchor rows' distances to the whole
// batch as one [P, B] matrix, each set's log-sum-exp a masked dense reduction.
#include "losses/lifted.h"

#include <cmath>
#include <limits>
#include <vector>

#include "engine/ops.h"
#include "kernels/common/check.h"
#include "losses/masked.h"

namespace losses {

using engine::Tensor;

Tensor lifted_loss(const Tensor& embeddings, const Tensor& labels, Metric metric, double margin,
                   double norm_weight) {
  const std::vector<int64_t> y = check_spc2_batch(embeddings, labels, "lifted_loss");
  ENGINE_CHECK(std::isfinite(margin) && std::isfinite(norm_weight),
               "lifted_loss: margin and norm_weight must be finite, got ", margin, " and ",
               norm_weight);
  const int64_t batch = embeddings.size(0), pairs = batch / 2;
  std::vector<int64_t> even(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) even[static_cast<size_t>(i)] = 2 * i;

  const Tensor x = embed_for_metric(embeddings, metric);
  const Tensor anchors = engine::index_select(x, Tensor::from_indices(even, {pairs}, x.device()));
  const Tensor d = distance_matrix(anchors, x, metric);  // [P, B]

  std::vector<double> pos_bias(static_cast<size_t>(pairs * batch));
  std::vector<double> neg_bias(pos_bias.size());
  std::vector<double> has_negative(static_cast<size_t>(pairs), 0.0);
  const double excluded = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t a = 2 * i;
    for (int64_t j = 0; j < batch; ++j) {
      const size_t at = static_cast<size_t>(i * batch + j);
      const bool same = y[static_cast<size_t>(j)] == y[static_cast<size_t>(a)];
      pos_bias[at] = same && j != a ? 0.0 : excluded;
      neg_bias[at] = same ? excluded : 0.0;
      if (!same) has_negative[static_cast<size_t>(i)] = 1.0;
    }
    // No negatives: l_a = 0. Its row is left unmasked (finite) and weighted 0 below, because a
    // log-sum-exp over nothing is -inf and its backward would produce 0 * NaN.
    if (has_negative[static_cast<size_t>(i)] == 0.0)
      for (int64_t j = 0; j < batch; ++j) neg_bias[static_cast<size_t>(i * batch + j)] = 0.0;
  }
  const auto host = [&](const std::vector<double>& values, const engine::Shape& shape) {
    return Tensor::from_vector(values, shape, x.dtype(), x.device());
  };
  // Every anchor has its partner in P_a, so the positive log-sum-exp is finite.
  const Tensor pos_term = engine::logsumexp(d + host(pos_bias, {pairs, batch}), 1);
  const Tensor neg_term =
      engine::logsumexp((engine::neg(d) + margin) + host(neg_bias, {pairs, batch}), 1);
  const Tensor per_anchor = engine::relu(pos_term + neg_term) * host(has_negative, {pairs});
  return engine::mean(per_anchor) + engine::mean(detail::row_norms(x)) * norm_weight;
}

Tensor lifted_loss(const Tensor& embeddings, const Tensor& labels, Metric metric) {
  return lifted_loss(embeddings, labels, metric, default_margin(metric));
}

}  // namespace losses
