// Madry min-max for the triplet loss (robrank defenses/pnp.py
// mmt_training_step + minmaxtriplet; docs/defenses.md).
//
//   1. e = f(x) in eval mode, no gradient; B triplets (a, p, n) mined on e with the loss's miner
//      (semihard band 1.0 for N and E: common.h adversary_mining_margin).
//   2. PGD on the stacked [a; p; n] images (each triplet its own copies), descending
//        mean_i d(a~_i, n~_i) - d(a~_i, p~_i)  = -mean_i H(a~_i, p~_i, n~_i)
//      i.e. the inner maximization of the triplet loss without its hinge.
//   3. loss = triplet(a~, p~, n~) with the loss margin, one train-mode forward of 3B images.
// The papers report that this direct adaptation collapses the model (Zhou et al. TPAMI §4;
// robrank defenses/pnp.py); it is here as the baseline the other recipes are measured against.
// Cost: eta + 1.
#include <memory>

#include "attacks/defenses/common.h"
#include "attacks/defenses/recipes.h"
#include "engine/ops.h"
#include "losses/miners.h"
#include "losses/triplet.h"

namespace attacks::defenses {

namespace {

class Madry : public Defense {
 public:
  explicit Madry(const DefenseOptions& options) : options_(options) {}
  const char* name() const override { return "madry"; }

  StepResult step(TrainingContext& context, const engine::Tensor& images,
                  const engine::Tensor& labels) override {
    const losses::Metric metric = context.metric;
    const auto [clean, t] = mine_adversary_triplets(context, images, labels);
    const int64_t b = t.size();
    const engine::Tensor apn_images =
        gather_rows(images, engine::concat({t.anchor, t.positive, t.negative}, 0));
    const Objective harden = [&](const engine::Tensor& x, int64_t) {
      const engine::Tensor e = context.model(x);
      return -engine::mean(losses::triplet_hardness(e.slice(0, 0, b), e.slice(0, b, 2 * b),
                                                    e.slice(0, 2 * b, 3 * b), metric));
    };
    PgdTrace trace;
    const engine::Tensor adversarial =
        adversary_pgd(context.model, apn_images, harden, options_.pgd, context.mining, &trace);
    const engine::Tensor e = context.model(adversarial);
    const engine::Tensor loss = losses::triplet_loss_rows(
        e.slice(0, 0, b), e.slice(0, b, 2 * b), e.slice(0, 2 * b, 3 * b), metric, context.margin);
    return adversarial_loss_result(loss, clean_triplet_loss(clean, t, metric, context.margin),
                                   trace);
  }

 private:
  DefenseOptions options_;
};

}  // namespace

std::unique_ptr<Defense> make_madry(const DefenseOptions& options) {
  return std::make_unique<Madry>(options);
}

}  // namespace attacks::defenses
