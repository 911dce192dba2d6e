// Contrastive loss (math and robrank quirks in contrastive.h).
#include "losses/contrastive.h"

#include <cmath>

#include "engine/ops.h"
#include "kernels/common/check.h"
#include "losses/masked.h"

namespace losses {

using engine::Tensor;

Tensor contrastive_loss(const Tensor& embeddings, const Triplets& triplets, Metric metric,
                        double margin) {
  ENGINE_CHECK(embeddings.defined() && embeddings.dim() == 2,
               "contrastive_loss: expected embeddings [B, D], got ",
               embeddings.defined() ? embeddings.str() : "undefined");
  ENGINE_CHECK(triplets.size() >= 1, "contrastive_loss: no triplets");
  ENGINE_CHECK(std::isfinite(margin), "contrastive_loss: margin must be finite, got ", margin);
  const Tensor x = embed_for_metric(embeddings, metric);
  const Tensor a = engine::index_select(x, triplets.anchor);
  const Tensor p = engine::index_select(x, triplets.positive);
  const Tensor n = engine::index_select(x, triplets.negative);
  const Tensor d_ap = row_distance(a, p, metric);
  const Tensor d_an = row_distance(a, n, metric);
  if (metric == Metric::C) {
    // cos = 1 - d; max(0, cos - m) = relu(1 - m - d).
    return engine::mean(d_ap) + engine::mean(engine::relu(engine::neg(d_an) + (1.0 - margin)));
  }
  return engine::mean(d_ap) + detail::active_mean(engine::relu(engine::neg(d_an) + margin));
}

Tensor spc2_contrastive_loss(const Tensor& embeddings, const Tensor& labels, Miner miner,
                             Metric metric, engine::Generator& gen) {
  const Triplets triplets =
      mine_triplets(embeddings, labels, miner, metric, gen, kContrastiveMargin);
  return contrastive_loss(embeddings, triplets, metric, kContrastiveMargin);
}

}  // namespace losses
