// Multi-similarity loss with filtering mining (math in multi_similarity.h). The similarities of
// the anchor rows are one matmul; mining decides the kept sets on the host; both log-sum-exp
// terms are masked dense reductions (losses/masked.h).
#include "losses/multi_similarity.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "kernels/common/check.h"
#include "losses/distance.h"
#include "losses/masked.h"

namespace losses {
namespace {

using engine::Tensor;

void check_options(const MultiSimilarityOptions& o) {
  ENGINE_CHECK(o.alpha > 0.0 && o.beta > 0.0 && std::isfinite(o.alpha) && std::isfinite(o.beta) &&
                   std::isfinite(o.lambda) && std::isfinite(o.epsilon),
               "multi_similarity: alpha and beta must be > 0 and all options finite, got alpha ",
               o.alpha, ", beta ", o.beta, ", lambda ", o.lambda, ", epsilon ", o.epsilon);
}

std::vector<int64_t> anchor_rows(const Tensor& embeddings, const Tensor& labels,
                                 const MultiSimilarityOptions& options,
                                 std::vector<int64_t>& host_labels) {
  const char* op = "multi_similarity";
  host_labels = options.spc2_anchors ? check_spc2_batch(embeddings, labels, op)
                                     : check_labeled_batch(embeddings, labels, op);
  const int64_t step = options.spc2_anchors ? 2 : 1;
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < embeddings.size(0); i += step) rows.push_back(i);
  return rows;
}

// Similarities of the anchor rows to the whole batch: [A, B].
Tensor anchor_similarities(const Tensor& embeddings, const std::vector<int64_t>& rows) {
  const Tensor x = engine::l2_normalize(embeddings);
  const Tensor anchors = engine::index_select(
      x, Tensor::from_indices(rows, {static_cast<int64_t>(rows.size())}, x.device()));
  return engine::matmul(anchors, x.transpose(0, 1));
}

MultiSimilarityMining mine(const std::vector<double>& sim, const std::vector<int64_t>& rows,
                           const std::vector<int64_t>& labels,
                           const MultiSimilarityOptions& options) {
  const auto batch = static_cast<int64_t>(labels.size());
  MultiSimilarityMining m;
  m.anchor_rows = rows;
  m.positive.assign(rows.size() * labels.size(), 0);
  m.negative.assign(rows.size() * labels.size(), 0);
  m.used.assign(rows.size(), 0);
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t i = rows[r];
    const double* s = sim.data() + r * labels.size();
    double min_pos = std::numeric_limits<double>::infinity();
    double max_neg = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < batch; ++j) {
      if (j == i) continue;
      if (labels[j] == labels[i])
        min_pos = std::min(min_pos, s[j]);
      else
        max_neg = std::max(max_neg, s[j]);
    }
    // An empty P_i or N_i leaves the thresholds infinite, so nothing is kept on the other side.
    bool any_pos = false, any_neg = false;
    for (int64_t j = 0; j < batch; ++j) {
      if (j == i) continue;
      const size_t at = r * labels.size() + static_cast<size_t>(j);
      if (labels[j] == labels[i]) {
        m.positive[at] = s[j] - options.epsilon < max_neg;
        any_pos = any_pos || m.positive[at];
      } else {
        m.negative[at] = s[j] + options.epsilon > min_pos;
        any_neg = any_neg || m.negative[at];
      }
    }
    m.used[r] = any_pos && any_neg;
  }
  return m;
}

}  // namespace

MultiSimilarityMining mine_multi_similarity(const Tensor& embeddings, const Tensor& labels,
                                            const MultiSimilarityOptions& options) {
  check_options(options);
  std::vector<int64_t> host_labels;
  const std::vector<int64_t> rows = anchor_rows(embeddings, labels, options, host_labels);
  engine::NoGradGuard no_grad;
  const std::vector<double> sim = anchor_similarities(embeddings.detach(), rows).to_vector();
  return mine(sim, rows, host_labels, options);
}

Tensor multi_similarity_loss(const Tensor& embeddings, const Tensor& labels,
                             const MultiSimilarityOptions& options) {
  check_options(options);
  std::vector<int64_t> host_labels;
  const std::vector<int64_t> rows = anchor_rows(embeddings, labels, options, host_labels);
  const Tensor sim = anchor_similarities(embeddings, rows);
  const MultiSimilarityMining m = mine(sim.to_vector(), rows, host_labels, options);

  const Tensor pos_term =
      detail::log1p_sum_exp((sim - options.lambda) * (-options.alpha), m.positive) *
      (1.0 / options.alpha);
  const Tensor neg_term = detail::log1p_sum_exp((sim - options.lambda) * options.beta, m.negative) *
                          (1.0 / options.beta);
  // Mean over the used anchors: weight 1/count on them, 0 on the others.
  const auto used = static_cast<double>(std::count(m.used.begin(), m.used.end(), uint8_t{1}));
  std::vector<double> weight(rows.size(), 0.0);
  for (size_t r = 0; r < rows.size(); ++r)
    if (m.used[r]) weight[r] = 1.0 / used;
  const Tensor w = Tensor::from_vector(weight, {static_cast<int64_t>(rows.size())},
                                       embeddings.dtype(), embeddings.device());
  return engine::sum((pos_term + neg_term) * w);
}

}  // namespace losses
