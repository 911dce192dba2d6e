// REST, revised EST (robrank defenses/pnp.py rest_training_step): EST without
// the perturbed anchor, whose "misleading gradient" the TPAMI paper blames for EST's weakness.
//
//   1. e = f(x) in eval mode, no gradient; B triplets (a, p, n) mined on e with the loss's miner
//      (semihard band 1.0 for N and E: common.h adversary_mining_margin).
//   2. [p~; n~] = the ES adversary (common.h) on the stacked positive and negative images.
//   3. loss = triplet(f(a), f(p~), f(n~)) with the loss margin, the three parts embedded in ONE
//      train-mode forward of [a; p~; n~] (3B images), as robrank does.
// Cost: eta + 1 passes.
#include <memory>

#include "attacks/defenses/common.h"
#include "attacks/defenses/recipes.h"
#include "engine/ops.h"
#include "losses/miners.h"
#include "losses/triplet.h"

namespace attacks::defenses {

namespace {

class Rest : public Defense {
 public:
  explicit Rest(const DefenseOptions& options) : options_(options) {}
  const char* name() const override { return "rest"; }

  StepResult step(TrainingContext& context, const engine::Tensor& images,
                  const engine::Tensor& labels) override {
    const auto [clean, t] = mine_adversary_triplets(context, images, labels);
    const int64_t b = t.size();
    const engine::Tensor pn_index = engine::concat({t.positive, t.negative}, 0);
    PgdTrace trace;
    const engine::Tensor adversarial_pn = embedding_shift_adversary(
        context.model, gather_rows(images, pn_index), gather_rows(clean, pn_index), context.metric,
        options_.pgd, context.mining, &trace);
    const engine::Tensor e =
        context.model(engine::concat({gather_rows(images, t.anchor), adversarial_pn}, 0));
    const engine::Tensor loss =
        losses::triplet_loss_rows(e.slice(0, 0, b), e.slice(0, b, 2 * b), e.slice(0, 2 * b, 3 * b),
                                  context.metric, context.margin);
    return adversarial_loss_result(
        loss, clean_triplet_loss(clean, t, context.metric, context.margin), trace);
  }

 private:
  DefenseOptions options_;
};

}  // namespace

std::unique_ptr<Defense> make_rest(const DefenseOptions& options) {
  return std::make_unique<Rest>(options);
}

}  // namespace attacks::defenses
