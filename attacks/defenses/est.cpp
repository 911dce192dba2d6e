// EST, Embedding-Shifted Triplet (Zhou et al. TPAMI §4.1; robrank defenses/est.py).
//
//   1. e = f(x) in eval mode, no gradient: the ES adversary's reference and the logged clean loss.
//   2. x~ = the ES adversary on every image of the batch (common.h): maximize d(f^(x~_i), f^(x_i))
//      within the eps-ball, eta PGD steps.
//   3. loss = the configured loss (e.g. triplet with its miner) on f(x~) in train mode: anchors,
//      positives and negatives are all perturbed, and triplets are mined on the adversarial
//      embeddings, as robrank does.
// Cost: eta + 1 forward/backward passes (plus one no-grad forward for the reference).
// Difference from robrank: its clean forward runs in whatever mode the model is in (train), which
// moves BN running statistics on models with BN; ours is in eval mode and has no side effect.
#include <memory>

#include "attacks/defenses/common.h"
#include "attacks/defenses/recipes.h"
#include "engine/autograd.h"

namespace attacks::defenses {

namespace {

class Est : public Defense {
 public:
  explicit Est(const DefenseOptions& options) : options_(options) {}
  const char* name() const override { return "est"; }

  StepResult step(TrainingContext& context, const engine::Tensor& images,
                  const engine::Tensor& labels) override {
    const AttackedBatch attacked = est_attack(options_.pgd, context, images, labels);
    return adversarial_loss_result(
        context.loss(context.model(attacked.adversarial), labels, context.mining),
        attacked.clean_loss, attacked.trace);
  }

 private:
  DefenseOptions options_;
};

}  // namespace

AttackedBatch est_attack(const PgdOptions& pgd, TrainingContext& context,
                         const engine::Tensor& images, const engine::Tensor& labels) {
  AttackedBatch attacked;
  const engine::Tensor clean = clean_embeddings(context.model, images);
  {
    // Logged only: mined with a copy of the stream, so logging does not change training.
    engine::NoGradGuard no_grad;
    engine::Generator copy = context.mining;
    attacked.clean_loss = context.loss(clean, labels, copy).detach();
  }
  attacked.adversarial = embedding_shift_adversary(context.model, images, clean, context.metric,
                                                   pgd, context.mining, &attacked.trace);
  return attacked;
}

std::unique_ptr<Defense> make_est(const DefenseOptions& options) {
  return std::make_unique<Est>(options);
}

}  // namespace attacks::defenses
