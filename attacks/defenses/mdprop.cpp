// AdvProp-D and MDProp (MDProp §3 and Algorithm 1).
//
// The model has K = targets.size() + 1 BN branches (engine/nn/batch_norm.h). One step on a batch X
// of B images with labels Y:
//   for k = 1 .. K-1, with T = targets[k-1]:
//     for every image i pick T targets j among the batch's images of another class (uniformly,
//     without replacement when there are enough; from the mining stream), and take their
//     embeddings t_ij = f_k(x_j) in eval mode through branch k, without gradient;
//     X^k = PGD on X in eval mode through branch k, descending the feature-space loss
//       mean_i (1/T) sum_j || f_k(x~_i) - t_ij ||^2        (attacks/objectives.h; MDProp eq. 3,
//     T = 1 is the single-targeted STAX of eq. 16, T > 1 a multi-targeted MTAX).
//     f_k is the embedding as the loss's metric compares it (losses::embed_for_metric:
//     L2-normalized for C and N, as the paper's networks normalize their output; raw for E).
//   One train-mode forward of [X; X^1; ...; X^{K-1}] with BN rows [kB, (k+1)B) routed to branch k;
//   loss = sum_k L(f([...]) rows of part k, Y), L the configured loss (e.g. multi-similarity or
//   ArcFace), as Algorithm 1 line 11 sums it; with reduction "mean", (1/K) of that sum, eq. 5's
//   expectation over k.
// Evaluation afterwards uses branch 0 only. AdvProp-D = targets {1}; MDProp = {1, T}.
// With mdprop.shared_bn (the baselines of MDProp Appendix C.2) every k uses branch 0 and the
// joined forward routes nothing: one BN normalizes clean and adversarial rows together.
// Cost: the sum of the adversaries' PGD steps + 1 passes.
//
// Differences from the MDProp code (research/ecosystem.md §5):
// - the code perturbs half of the batch per adversarial branch and routes [clean N | adv1 N/2 |
//   adv2 N/2]; we follow Algorithm 1 (every image gets one adversarial copy per branch);
// - its targets are random permutations of the batch (same-class images included); ours are of
//   other, pairwise different classes (eq. 3's j != l), chosen as the evaluation MTAX chooses them;
// - its loss for T targets is (mean_j ||f - t_j||)^2; ours is the paper's eq. 3 with each
//   distance squared, (1/T) sum_j ||f - t_j||^2 (the same for T = 1);
// - it computes ONE loss over the joined batch [clean N | adv1 N/2 | adv2 N/2] with the joined
//   labels (pairs of multi-similarity or ArcFace span clean and adversarial rows, and the clean
//   part weighs half); ours is the sum over parts of Algorithm 1 line 11, or with
//   mdprop.reduction "mean" eq. 5's mean over k. The sum is K times the mean: with Adam's coupled
//   weight decay (4e-4 in the CUB config) it weighs the loss K times more against the decay;
// - it starts from a uniform +-5e-4 perturbation; ours from the clean image (PGD's default);
// - it works on normalized images (x - mean) / std, bounded by the batch's min/max; ours are
//   pixels in [0, 1] (the ResNets normalize inside the model), so its eps = 0.01 is about
//   0.01 * 0.226 = 0.00226 here (ImageNet std 0.229, 0.224, 0.225):
//   configs/cub/mdprop-resnet50.json.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "attacks/defenses/mdprop.h"

#include "attacks/defenses/common.h"
#include "attacks/defenses/recipes.h"
#include "attacks/objectives.h"
#include "attacks/selection.h"
#include "engine/autograd.h"
#include "engine/nn/batch_norm.h"
#include "engine/ops.h"
#include "kernels/common/check.h"
#include "losses/distance.h"

namespace attacks::defenses {

using engine::Tensor;

std::vector<int64_t> mdprop_pick_targets(const std::vector<int64_t>& labels, int64_t count,
                                         engine::Generator& gen) {
  // The batch is both the queries and the gallery: the evaluation MTAX's rule, one definition.
  return attacks::select_feature_targets(labels, labels, count, gen);
}

namespace {

// Sets the BN eval branch and routes of every BN layer for its lifetime and puts back the
// defaults (eval branch 0, no routes) afterwards, also when the attack or forward throws.
class BranchGuard {
 public:
  BranchGuard(models::Model& model, int64_t eval_branch,
              const std::vector<engine::BatchNormRoute>& routes)
      : model_(model) {
    engine::nn::set_batch_norm_eval_branch(model_, eval_branch);
    engine::nn::set_batch_norm_routes(model_, routes);
  }
  ~BranchGuard() {
    engine::nn::set_batch_norm_eval_branch(model_, 0);
    engine::nn::set_batch_norm_routes(model_, {});
  }
  BranchGuard(const BranchGuard&) = delete;
  BranchGuard& operator=(const BranchGuard&) = delete;

 private:
  models::Model& model_;
};

class Mdprop : public Defense {
 public:
  explicit Mdprop(const DefenseOptions& options) : options_(options) {}
  const char* name() const override { return "mdprop"; }

  StepResult step(TrainingContext& context, const Tensor& images, const Tensor& labels) override {
    models::Model& model = context.model;
    const int64_t branches = static_cast<int64_t>(options_.mdprop.targets.size()) + 1;
    const bool shared = options_.mdprop.shared_bn;
    ENGINE_CHECK(shared || !engine::nn::batch_norm_layers(model).empty(), "defense mdprop: model ",
                 model.name(), " has no batch norm to branch (use c2f2-bn or a resnet)");
    const int64_t want = shared ? 1 : branches;
    ENGINE_CHECK(model.bn_branches() == want || (shared && model.bn_branches() == 0),
                 "defense mdprop: ", branches - 1, " adversarial branch(es) (mdprop.targets",
                 shared ? ", shared_bn" : "", ") need model.bn_branches = ", want,
                 ", the model has ", model.bn_branches());
    const int64_t n = images.size(0);
    const std::vector<int64_t> host_labels = labels.to_indices();
    StepResult result;
    result.passes = 1;
    std::vector<Tensor> parts = {images};
    for (int64_t k = 1; k < branches; ++k) {
      const int64_t count = options_.mdprop.targets[static_cast<size_t>(k - 1)];
      const Tensor index = Tensor::from_indices(
          mdprop_pick_targets(host_labels, count, context.mining), {n * count});
      PgdTrace trace;
      Tensor adversarial;
      {
        const BranchGuard through_branch(model, shared ? 0 : k, {});
        const losses::Metric metric = context.metric;
        const Tensor targets =
            gather_rows(losses::embed_for_metric(clean_embeddings(model, images), metric), index)
                .reshape({n, count, -1});
        const Objective impersonate = [&](const Tensor& x, int64_t) {
          return feature_targeted_loss(losses::embed_for_metric(model(x), metric), targets);
        };
        adversarial =
            adversary_pgd(model, images, impersonate, options_.pgd, context.mining, &trace);
      }
      parts.push_back(adversarial);
      result.passes += trace.steps;
      log_attack(result.logs, trace, "_" + std::to_string(k));
    }
    std::vector<engine::BatchNormRoute> routes;
    for (int64_t k = 0; k < branches && !shared; ++k) routes.push_back({k * n, (k + 1) * n, k});
    Tensor e;
    {
      const BranchGuard routed(model, 0, routes);
      e = model(engine::concat(parts, 0));
    }
    for (int64_t k = 0; k < branches; ++k) {
      const Tensor part_loss = context.loss(e.slice(0, k * n, (k + 1) * n), labels, context.mining);
      result.loss = k == 0 ? part_loss : result.loss + part_loss;
      result.logs.push_back(
          {k == 0 ? std::string("clean_loss") : "adversarial_loss_" + std::to_string(k),
           part_loss.detach()});
    }
    if (options_.mdprop.reduction == MdpropReduction::Mean)
      result.loss = result.loss / static_cast<double>(branches);
    return result;
  }

 private:
  DefenseOptions options_;
};

}  // namespace

std::unique_ptr<Defense> make_mdprop(const DefenseOptions& options) {
  return std::make_unique<Mdprop>(options);
}

}  // namespace attacks::defenses
