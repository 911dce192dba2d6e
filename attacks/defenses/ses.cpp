// SES, Suppressing Embedding Shift (Zhou et al. TPAMI §4.1 and its ECCV'20 supplement;
// robrank defenses/ses.py).
//
//   1. x~ = the ES adversary (common.h) on every image, reference f(x) in eval mode.
//   2. In train mode: e = f(x), e~ = f(x~) (two forwards, both with gradient);
//      loss = L(e) + w * mean_i s_i with L the configured loss and the shift
//        N: || n(e~_i) - n(e_i) + 1e-6 ||     C: 1 - cos(e~_i, e_i)
//        E: || n(e~_i) - e_i + 1e-6 ||  (robrank normalizes only the adversarial side for E, "so
//           the loss does not diverge"; kept as robrank has it)
//      where n() is L2 normalization; w = ses_weight (1.0).
// Cost: eta + 1 passes (the papers' count; SES trains on two forwards per batch).
#include <memory>

#include "attacks/defenses/common.h"
#include "attacks/defenses/recipes.h"
#include "engine/ops.h"
#include "losses/distance.h"

namespace attacks::defenses {

namespace {

class Ses : public Defense {
 public:
  explicit Ses(const DefenseOptions& options) : options_(options) {}
  const char* name() const override { return "ses"; }

  StepResult step(TrainingContext& context, const engine::Tensor& images,
                  const engine::Tensor& labels) override {
    const AttackedBatch attacked = ses_attack(options_.pgd, context, images);
    const engine::Tensor clean = context.model(images);
    const engine::Tensor shifted = context.model(attacked.adversarial);
    const engine::Tensor clean_loss = context.loss(clean, labels, context.mining);
    const engine::Tensor mean_shift =
        engine::mean(ses_embedding_shift(shifted, clean, context.metric));
    return ses_loss_result(clean_loss, mean_shift, options_.ses_weight, attacked.trace);
  }

 private:
  DefenseOptions options_;
};

}  // namespace

AttackedBatch ses_attack(const PgdOptions& pgd, TrainingContext& context,
                         const engine::Tensor& images) {
  AttackedBatch attacked;
  const engine::Tensor reference = clean_embeddings(context.model, images);
  attacked.adversarial = embedding_shift_adversary(context.model, images, reference, context.metric,
                                                   pgd, context.mining, &attacked.trace);
  return attacked;
}

engine::Tensor ses_embedding_shift(const engine::Tensor& shifted, const engine::Tensor& clean,
                                   losses::Metric metric) {
  if (metric == losses::Metric::C) return losses::row_distance(shifted, clean, losses::Metric::C);
  const engine::Tensor other =
      metric == losses::Metric::N ? losses::embed_for_metric(clean, losses::Metric::N) : clean;
  return losses::row_distance(losses::embed_for_metric(shifted, losses::Metric::N), other,
                              losses::Metric::E);
}

StepResult ses_loss_result(const engine::Tensor& clean_loss, const engine::Tensor& mean_shift,
                           double weight, const PgdTrace& trace) {
  const engine::Tensor loss = clean_loss + mean_shift * weight;
  return adversarial_step_result(
      loss, {{"clean_loss", clean_loss.detach()}, {"embedding_shift", mean_shift.detach()}}, trace);
}

std::unique_ptr<Defense> make_ses(const DefenseOptions& options) {
  return std::make_unique<Ses>(options);
}

}  // namespace attacks::defenses
