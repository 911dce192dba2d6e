// Hardness Manipulation (hm.h).
#include "attacks/defenses/hm.h"

#include <cmath>
#include <memory>

#include "attacks/defenses/common.h"
#include "attacks/defenses/recipes.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "kernels/common/check.h"
#include "losses/ics.h"
#include "losses/miners.h"
#include "losses/triplet.h"

namespace attacks::defenses {

using engine::Tensor;

void validate_hm(const HmOptions& o) {
  ENGINE_CHECK(std::isfinite(o.gamma) && o.gamma > 0.0,
               "defense option hm.gamma must be a finite number > 0, got ", o.gamma);
  ENGINE_CHECK(std::isfinite(o.xi), "defense option hm.xi must be finite, got ", o.xi);
  ENGINE_CHECK(std::isfinite(o.initial_loss), "defense option hm.initial_loss must be finite");
  ENGINE_CHECK(std::isfinite(o.ics_lambda) && o.ics_lambda >= 0.0,
               "defense option hm.ics_lambda must be a finite number >= 0, got ", o.ics_lambda);
  ENGINE_CHECK(std::isfinite(o.ics_margin) && o.ics_margin >= 0.0,
               "defense option hm.ics_margin must be a finite number >= 0, got ", o.ics_margin);
  ENGINE_CHECK(std::isfinite(o.loss_upper) && o.loss_upper >= 0.0,
               "defense option hm.loss_upper must be a finite number >= 0 (0 = gamma), got ",
               o.loss_upper);
  ENGINE_CHECK(std::isfinite(o.stop_tolerance) && o.stop_tolerance >= 0.0,
               "defense option hm.stop_tolerance must be a finite number >= 0");
}

Tensor hm_destination_hardness(const HmOptions& o, const Tensor& previous_loss,
                               const Tensor& miner_hardness) {
  engine::NoGradGuard no_grad;
  const Tensor zero = previous_loss.detach() * 0.0;  // [1] on the loss's device and dtype
  const double upper = o.loss_upper > 0.0 ? o.loss_upper : o.gamma;  // u of the supplement
  const Tensor level = engine::clamp(previous_loss.detach(), 0.0, upper) / upper;  // l
  switch (o.destination) {
    case HmDestination::Const0:
      return zero;
    case HmDestination::ConstHalfGamma:
      return zero - o.gamma / 2.0;
    case HmDestination::ConstGamma:
      return zero - o.gamma;
    case HmDestination::GLga:
      return level * -o.gamma;
    case HmDestination::G2:
      return engine::pow(level, 2.0) * -o.gamma;
    case HmDestination::GSqrt:
      return engine::sqrt(level) * -o.gamma;
    case HmDestination::GB:
      ENGINE_CHECK(miner_hardness.defined(),
                   "hm_destination_hardness: g_b needs the miner hardness");
      return miner_hardness.detach() + (level * -o.xi + o.xi);  // H_D + xi (1 - l)
    case HmDestination::Miner:
      break;
  }
  engine::fail("hm_destination_hardness: '", hm_destination_name(o), "' is not a pseudo-hardness");
}

namespace {

class HardnessManipulation : public Defense {
 public:
  explicit HardnessManipulation(const DefenseOptions& options) : options_(options) {}
  const char* name() const override { return "hm"; }

  StepResult step(TrainingContext& context, const Tensor& images, const Tensor& labels) override {
    const HmOptions& o = options_.hm;
    const losses::Metric metric = context.metric;
    if (!previous_loss_.defined()) {
      previous_loss_ = Tensor::from_vector({o.initial_loss}, {1}, images.dtype(), images.device());
    } else if (!(previous_loss_.device() == images.device())) {
      previous_loss_ = previous_loss_.to(images.device());  // loaded from a checkpoint
    }
    const Tensor clean = losses::embed_for_metric(clean_embeddings(context.model, images), metric);
    const losses::Triplets s =
        losses::mine_triplets(clean, labels, o.source, metric, context.mining, context.margin);
    const int64_t b = s.size();

    const bool miner_destination = o.destination == HmDestination::Miner;
    const bool skip_attack = miner_destination && o.destination_miner == o.source;
    const Tensor apn_images =
        gather_rows(images, engine::concat({s.anchor, s.positive, s.negative}, 0));
    Tensor adversarial = apn_images;
    PgdTrace trace;
    Tensor destination;
    if (!skip_attack) {
      Tensor miner_hardness;
      if (miner_destination || o.destination == HmDestination::GB) {
        const losses::Triplets d = losses::mine_triplets(clean, labels, o.destination_miner, metric,
                                                         context.mining, context.margin);
        // Recomputed on the rows with the loss's distance (robrank: F.pairwise_distance, 1e-6).
        miner_hardness =
            losses::triplet_hardness(gather_rows(clean, d.anchor), gather_rows(clean, d.positive),
                                     gather_rows(clean, d.negative), metric)
                .detach();
      }
      destination = miner_destination ? miner_hardness
                                      : hm_destination_hardness(o, previous_loss_, miner_hardness);
      const bool et = o.objective == HmObjective::Et;
      const Objective manipulate = [&](const Tensor& x, int64_t) {
        const Tensor e = context.model(x);
        const Tensor gap = losses::triplet_hardness(e.slice(0, 0, b), e.slice(0, b, 2 * b),
                                                    e.slice(0, 2 * b, 3 * b), metric) -
                           destination;
        // et: min(0, gap)^2 = relu(-gap)^2, zero once the triplet is as hard as its destination.
        return engine::mean(engine::pow(et ? engine::relu(-gap) : gap, 2.0));
      };
      PgdOptions pgd = options_.pgd;
      pgd.stop_tolerance = o.stop_tolerance;
      adversarial =
          adversary_pgd(context.model, apn_images, manipulate, pgd, context.mining, &trace);
    }
    // The clean anchors and positives of ICS go through the model first, then the adversarial
    // triplets: robrank's order, which decides what a train-mode BN's running statistics saw last.
    Tensor ap;
    if (o.ics) ap = context.model(gather_rows(images, engine::concat({s.anchor, s.positive}, 0)));
    const Tensor e = context.model(adversarial);
    const Tensor adversarial_anchors = e.slice(0, 0, b);
    const Tensor adversarial_loss =
        losses::triplet_loss_rows(adversarial_anchors, e.slice(0, b, 2 * b),
                                  e.slice(0, 2 * b, 3 * b), metric, context.margin);
    previous_loss_ = adversarial_loss.detach().reshape({1});
    StepResult result;
    result.loss = adversarial_loss;
    if (o.ics) {
      const Tensor ics =
          losses::ics_loss(ap.slice(0, 0, b), adversarial_anchors, ap.slice(0, b, 2 * b), metric,
                           o.ics_lambda, o.ics_margin);
      result.loss = result.loss + ics;
      result.logs.push_back({"ics_loss", ics.detach()});
    }
    result.logs.push_back({"clean_loss", clean_triplet_loss(clean, s, metric, context.margin)});
    result.logs.push_back({"adversarial_loss", adversarial_loss.detach()});
    if (!skip_attack) {
      log_attack(result.logs, trace);
      result.logs.push_back({"destination_hardness", engine::mean(destination)});
    }
    result.passes = trace.steps + 1;
    return result;
  }

  std::map<std::string, Tensor> state() const override {
    if (!previous_loss_.defined()) return {};
    return {{"hm_previous_loss", previous_loss_}};
  }

  void load_state(const std::map<std::string, Tensor>& state) override {
    previous_loss_ = Tensor();  // empty: the state before the first step
    for (const auto& [key, value] : state) {
      ENGINE_CHECK(key == "hm_previous_loss", "defense hm: unexpected state '", key, "'");
      ENGINE_CHECK(value.numel() == 1,
                   "defense hm: state 'hm_previous_loss' must hold one value, got ", value.str());
      previous_loss_ = value.detach().reshape({1});
    }
  }

 private:
  DefenseOptions options_;
  Tensor previous_loss_;  // l_{t-1}, [1]; undefined until the first step (then initial_loss)
};

}  // namespace

std::unique_ptr<Defense> make_hm(const DefenseOptions& options) {
  return std::make_unique<HardnessManipulation>(options);
}

}  // namespace attacks::defenses
