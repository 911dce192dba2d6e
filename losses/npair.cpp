// N-pair loss (math in npair.h): all anchors' inner products with the batch in one matmul, the
// log(1 + sum exp) over each anchor's negatives as a masked dense reduction.
#include "losses/npair.h"

#include <cmath>
#include <vector>

#include "engine/ops.h"
#include "kernels/common/check.h"
#include "losses/masked.h"

namespace losses {

using engine::Tensor;

Tensor npair_loss(const Tensor& embeddings, const Tensor& labels, Metric metric,
                  double norm_weight) {
  const std::vector<int64_t> y = check_spc2_batch(embeddings, labels, "npair_loss");
  ENGINE_CHECK(std::isfinite(norm_weight), "npair_loss: norm_weight must be finite, got ",
               norm_weight);
  const int64_t batch = embeddings.size(0), pairs = batch / 2;
  std::vector<int64_t> even(static_cast<size_t>(pairs)), odd(even.size());
  for (int64_t i = 0; i < pairs; ++i) {
    even[static_cast<size_t>(i)] = 2 * i;
    odd[static_cast<size_t>(i)] = 2 * i + 1;
  }
  const Tensor x = embed_for_metric(embeddings, metric);
  const Tensor a = engine::l2_normalize(
      engine::index_select(x, Tensor::from_indices(even, {pairs}, x.device())));
  const Tensor p = engine::index_select(x, Tensor::from_indices(odd, {pairs}, x.device()));
  // <a^, x_n - p> = <a^, x_n> - <a^, p> for every row n at once.
  const Tensor inner =
      engine::matmul(a, x.transpose(0, 1)) - engine::sum(a * p, {1}, /*keepdim=*/true);  // [P, B]
  std::vector<uint8_t> negative(static_cast<size_t>(pairs * batch), 0);
  for (int64_t i = 0; i < pairs; ++i)
    for (int64_t j = 0; j < batch; ++j)
      negative[static_cast<size_t>(i * batch + j)] =
          y[static_cast<size_t>(j)] != y[static_cast<size_t>(2 * i)];
  return engine::mean(detail::log1p_sum_exp(inner, negative)) +
         engine::mean(detail::row_norms(x)) * norm_weight;
}

}  // namespace losses
