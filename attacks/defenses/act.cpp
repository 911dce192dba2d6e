// ACT, Anti-Collapse Triplet (Zhou et al. TPAMI §4.2; robrank defenses/pnp.py
// pnp_training_step + PositiveNegativePerplexing.pncollapse).
//
//   1. e = f(x) in eval mode, no gradient; B triplets (a, p, n) mined on e with the loss's miner
//      (semihard band 1.0 for N and E, as robrank passes: common.h adversary_mining_margin).
//   2. PGD on the stacked [p; n] images (the anchors are untouched), descending
//        mean_i d(f^(p~_i), f^(n~_i))
//      (Euclidean ||. + 1e-6|| between normalized embeddings for N, raw for E, 1 - cos for C):
//      the adversary tries to collapse each positive onto its negative.
//   3. In train mode: f([p~; n~]) in one forward and f(a) of the clean anchors in a second
//      (robrank since its issue #7); loss = triplet(a, p~, n~) with the loss margin (0.2 for N).
//      With act.anchor "unnormalized" (robrank before issue #7, defense.h ActAnchor) f(a) is an
//      eval-mode forward and stays unnormalized in the loss (act_triplet_loss, act.h).
// Cost: eta + 1 passes.
#include <memory>

#include "attacks/defenses/act.h"
#include "attacks/defenses/common.h"
#include "attacks/defenses/recipes.h"
#include "engine/ops.h"
#include "losses/distance.h"
#include "losses/miners.h"
#include "losses/triplet.h"

namespace attacks::defenses {

namespace {

class Act : public Defense {
 public:
  explicit Act(const DefenseOptions& options) : options_(options) {}
  const char* name() const override { return "act"; }

  StepResult step(TrainingContext& context, const engine::Tensor& images,
                  const engine::Tensor& labels) override {
    const losses::Metric metric = context.metric;
    const auto [clean, t] = mine_adversary_triplets(context, images, labels);
    const int64_t b = t.size();
    const engine::Tensor pn_images =
        gather_rows(images, engine::concat({t.positive, t.negative}, 0));
    const Objective collapse = [&](const engine::Tensor& x, int64_t) {
      const engine::Tensor e = losses::embed_for_metric(context.model(x), metric);
      return engine::mean(losses::row_distance(e.slice(0, 0, b), e.slice(0, b, 2 * b), metric));
    };
    PgdTrace trace;
    const engine::Tensor adversarial_pn =
        adversary_pgd(context.model, pn_images, collapse, options_.pgd, context.mining, &trace);
    const engine::Tensor pn = context.model(adversarial_pn);
    const engine::Tensor anchors = anchor_embeddings(context.model, gather_rows(images, t.anchor));
    const engine::Tensor loss = act_triplet_loss(anchors, pn.slice(0, 0, b), pn.slice(0, b, 2 * b),
                                                 metric, context.margin, options_.act_anchor);
    return adversarial_loss_result(loss, clean_triplet_loss(clean, t, metric, context.margin),
                                   trace);
  }

 private:
  // f(a) with gradient: train mode, or, for Unnormalized, eval mode as robrank's step-1 clean
  // forward was before its issue #7 (the same for a model without BN, such as C2F2).
  engine::Tensor anchor_embeddings(models::Model& model, const engine::Tensor& anchor_images) {
    if (options_.act_anchor == ActAnchor::Normalized) return model(anchor_images);
    EvalModeGuard eval_mode(model);
    return model(anchor_images);
  }

  DefenseOptions options_;
};

}  // namespace

engine::Tensor act_triplet_loss(const engine::Tensor& anchors, const engine::Tensor& positives,
                                const engine::Tensor& negatives, losses::Metric metric,
                                double margin, ActAnchor anchor) {
  if (anchor == ActAnchor::Normalized || metric != losses::Metric::N) {
    return losses::triplet_loss_rows(anchors, positives, negatives, metric, margin);
  }
  // Euclidean (metric E: no normalization inside) from the raw anchors to the unit p~ and n~.
  return losses::triplet_loss_rows(anchors, losses::embed_for_metric(positives, metric),
                                   losses::embed_for_metric(negatives, metric), losses::Metric::E,
                                   margin);
}

std::unique_ptr<Defense> make_act(const DefenseOptions& options) {
  return std::make_unique<Act>(options);
}

}  // namespace attacks::defenses
