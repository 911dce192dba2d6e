// Global triplet mining over micro-batches and ranks (header: tools/dml/global_mining.h).
#include "tools/dml/global_mining.h"

#include <string>
#include <vector>

#include "attacks/defenses/defense.h"
#include "engine/autograd.h"
#include "engine/dist/communicator.h"
#include "engine/ops.h"
#include "kernels/common/check.h"
#include "tools/dml/args.h"

namespace dml {

namespace {

// Why global mining is not defined for `recipe`, or "" where it is (none, EST, SES): the training
// loss's triplets can be mined over the gathered batch only when the recipe's attack mines nothing
// and its loss is the configured loss on one set of embeddings, plus at most a per-row term (SES's
// shift) whose mean is taken over the gathered rows (docs/distributed.md).
std::string global_mining_refusal(attacks::defenses::Recipe recipe) {
  using attacks::defenses::Recipe;
  switch (recipe) {
    case Recipe::None:
    case Recipe::Est:
    case Recipe::Ses:
      return "";
    case Recipe::Rest:
    case Recipe::Act:
    case Recipe::Madry:
      return "its attack perturbs the images of triplets mined from the batch, so a global scope "
             "would need the attack to see other ranks' images";
    case Recipe::Hm:
      return "its attack perturbs the images of triplets mined from the batch and its loss is "
             "on those triplets' rows, so a global scope would need the attack to see other ranks' "
             "images";
    case Recipe::Mdprop:
      return "its attack picks targets among the batch's images of other classes, so a global "
             "scope would need the attack to see other ranks' images";
  }
  return "unknown defense";
}

}  // namespace

void check_global_mining(const TrainConfig& config, const std::string& step_cut) {
  if (config.loss != Loss::Triplet && config.loss != Loss::Contrastive) {
    throw UsageError(
        "config key 'train.mining_scope': 'global' mines triplets over the whole batch, and "
        "loss '" +
        std::string(loss_name(config.loss)) +
        "' does not take mined triplets (use triplet or contrastive, or mining_scope 'local') "
        "with " +
        step_cut);
  }
  const std::string why = global_mining_refusal(config.defense.recipe);
  if (!why.empty()) {
    throw UsageError("config key 'train.mining_scope': 'global' is not built for defense '" +
                     std::string(attacks::defenses::recipe_name(config.defense.recipe)) + "' (" +
                     why + "); use 'local' with " + step_cut);
  }
}

engine::Tensor gather_step_embeddings(const std::vector<engine::Tensor>& local) {
  ENGINE_CHECK(!local.empty(), "gather_step_embeddings: no micro-batch");
  engine::NoGradGuard no_grad;
  std::vector<engine::Tensor> rows;
  for (const engine::Tensor& e : local) rows.push_back(e.detach());
  const engine::Tensor mine = engine::concat(rows, 0);
  if (engine::dist::world().size == 1) return mine;
  const int64_t dim = mine.size(1);
  const engine::Tensor host = mine.to(engine::Device::cpu()).to(engine::DType::F32).contiguous();
  const float* data = host.data<float>();
  const std::vector<float> all =
      engine::dist::all_gather_varying(std::vector<float>(data, data + host.numel()));
  const int64_t total_rows = static_cast<int64_t>(all.size()) / dim;
  return engine::Tensor::from_vector(std::vector<double>(all.begin(), all.end()), {total_rows, dim},
                                     mine.dtype(), mine.device());
}

engine::Tensor with_live_rows(const engine::Tensor& step_embeddings, const engine::Tensor& live,
                              int64_t first_row) {
  const int64_t rows = step_embeddings.size(0), end = first_row + live.size(0);
  ENGINE_CHECK(first_row >= 0 && end <= rows && live.size(1) == step_embeddings.size(1),
               "with_live_rows: rows [", first_row, ", ", end, ") of ", live.size(1),
               " columns into ", engine::shape_str(step_embeddings.shape()));
  std::vector<engine::Tensor> parts;
  if (first_row > 0) parts.push_back(step_embeddings.slice(0, 0, first_row));
  parts.push_back(live);
  if (end < rows) parts.push_back(step_embeddings.slice(0, end, rows));
  return engine::concat(parts, 0);
}

}  // namespace dml
