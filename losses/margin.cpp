// Margin loss with learnable beta (math and robrank quirks in margin.h).
#include "losses/margin.h"

#include <cmath>

#include "engine/ops.h"
#include "kernels/common/check.h"
#include "losses/masked.h"

namespace losses {

using engine::Tensor;

MarginLoss::MarginLoss(Metric metric, const MarginLossOptions& options, engine::DType dtype)
    : metric_(metric), options_(options) {
  ENGINE_CHECK(
      std::isfinite(options.beta) && std::isfinite(options.margin) && options.beta_lr >= 0.0,
      "MarginLoss: beta and margin must be finite and beta_lr >= 0, got beta ", options.beta,
      ", margin ", options.margin, ", beta_lr ", options.beta_lr);
  beta_ = register_parameter("beta", Tensor::scalar(options.beta, dtype));
}

Tensor MarginLoss::loss(const Tensor& embeddings, const Triplets& triplets) const {
  ENGINE_CHECK(embeddings.defined() && embeddings.dim() == 2,
               "margin_loss: expected embeddings [B, D], got ",
               embeddings.defined() ? embeddings.str() : "undefined");
  ENGINE_CHECK(triplets.size() >= 1, "margin_loss: no triplets");
  ENGINE_CHECK(embeddings.dtype() == beta_.dtype() && embeddings.device() == beta_.device(),
               "margin_loss: embeddings ", embeddings.str(), " and beta ", beta_.str(),
               " differ in dtype or device (move the loss with to())");
  // robrank normalizes for every metric, E included.
  const Tensor x = engine::l2_normalize(embeddings);
  const Tensor a = engine::index_select(x, triplets.anchor);
  const Tensor d_ap = row_distance(a, engine::index_select(x, triplets.positive), metric_);
  const Tensor d_an = row_distance(a, engine::index_select(x, triplets.negative), metric_);
  const Tensor positive_term = engine::relu((d_ap - beta_) + options_.margin);
  const Tensor negative_term = engine::relu((beta_ - d_an) + options_.margin);
  return detail::active_mean(positive_term) + detail::active_mean(negative_term);
}

Tensor MarginLoss::spc2_loss(const Tensor& embeddings, const Tensor& labels, Miner miner,
                             engine::Generator& gen) const {
  // robrank passes no margin to the miner; semihard gets the loss margin here.
  const Triplets triplets = mine_triplets(engine::l2_normalize(embeddings.detach()), labels, miner,
                                          metric_, gen, options_.margin);
  return loss(embeddings, triplets);
}

Tensor MarginLoss::forward(const Tensor&) {
  engine::fail(
      "MarginLoss needs labels or triplets: call loss(embeddings, triplets) or "
      "spc2_loss(embeddings, labels, miner, gen)");
}

engine::optim::SgdGroup MarginLoss::param_group() const {
  engine::optim::SgdGroup group;
  group.params = {beta_};
  group.options.lr = options_.beta_lr;
  return group;
}

}  // namespace losses
