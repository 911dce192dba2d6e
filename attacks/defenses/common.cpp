// Shared pieces of the adversarial-training recipes (common.h).
#include "attacks/defenses/common.h"

#include <utility>
#include <vector>

#include "attacks/objectives.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "kernels/common/check.h"
#include "losses/triplet.h"

namespace attacks::defenses {

using engine::Tensor;

Tensor clean_embeddings(models::Model& model, const Tensor& images) {
  EvalModeGuard eval_mode(model);
  engine::NoGradGuard no_grad;
  return model(images).detach();
}

Tensor gather_rows(const Tensor& x, const Tensor& index) {
  return engine::index_select(x, index.device() == x.device() ? index : index.to(x.device()));
}

double adversary_mining_margin(losses::Metric metric) {
  return metric == losses::Metric::C ? 0.2 : 1.0;
}

AdversaryTriplets mine_adversary_triplets(TrainingContext& context, const Tensor& images,
                                          const Tensor& labels) {
  const Tensor clean = clean_embeddings(context.model, images);
  return {clean, losses::mine_triplets(clean, labels, context.miner, context.metric, context.mining,
                                       adversary_mining_margin(context.metric))};
}

Tensor adversary_pgd(models::Model& model, const Tensor& images, const Objective& objective,
                     const PgdOptions& options, engine::Generator& gen, PgdTrace* trace) {
  EvalModeGuard eval_mode(model);
  return pgd_attack(images, objective, seeded(options, gen), trace);
}

Tensor embedding_shift_adversary(models::Model& model, const Tensor& images,
                                 const Tensor& reference, losses::Metric metric,
                                 const PgdOptions& options, engine::Generator& gen,
                                 PgdTrace* trace) {
  ENGINE_CHECK(reference.dim() == 2 && reference.size(0) == images.size(0),
               "embedding_shift_adversary: reference ", reference.str(), " does not match images ",
               images.str());
  const Tensor target = losses::embed_for_metric(reference.detach(), metric).detach();
  // {-1, 0, 1} drawn on the host (the engine converts dtypes on the CPU only), then moved.
  const Tensor signs = engine::randint(target.shape(), -1, 2, gen).to(target.dtype());
  const Tensor first_target = target + (signs * 1e-7).to(target.device());
  const Objective objective = [&](const Tensor& x, int64_t step) {
    const Tensor e = losses::embed_for_metric(model(x), metric);
    return embedding_shift_loss(e, step == 0 ? first_target : target, metric);
  };
  return adversary_pgd(model, images, objective, options, gen, trace);
}

void log_attack(std::vector<std::pair<std::string, Tensor>>& logs, const PgdTrace& trace,
                const std::string& suffix) {
  if (trace.objective.empty()) return;
  logs.push_back({"attack_objective" + suffix, trace.objective.back()});
  if (!trace.max_delta.empty()) logs.push_back({"max_delta" + suffix, trace.max_delta.back()});
}

Tensor clean_triplet_loss(const Tensor& clean, const losses::Triplets& t, losses::Metric metric,
                          double margin) {
  // losses::triplet_loss, but through gather_rows: the indices may live on another device.
  return losses::triplet_loss_rows(gather_rows(clean, t.anchor), gather_rows(clean, t.positive),
                                   gather_rows(clean, t.negative), metric, margin);
}

StepResult adversarial_step_result(const Tensor& loss,
                                   std::vector<std::pair<std::string, Tensor>> logs,
                                   const PgdTrace& trace) {
  StepResult result;
  result.loss = loss;
  result.logs = std::move(logs);
  log_attack(result.logs, trace);
  result.passes = trace.steps + 1;
  return result;
}

StepResult adversarial_loss_result(const Tensor& adversarial_loss, const Tensor& clean_loss,
                                   const PgdTrace& trace) {
  return adversarial_step_result(
      adversarial_loss,
      {{"clean_loss", clean_loss}, {"adversarial_loss", adversarial_loss.detach()}}, trace);
}

}  // namespace attacks::defenses
