// Recipe names, option validation and the factory (defense.h).
#include "attacks/defenses/defense.h"

#include <algorithm>
#include <cmath>

#include "attacks/defenses/hm.h"
#include "attacks/defenses/recipes.h"
#include "kernels/common/check.h"

namespace attacks::defenses {

const std::vector<std::string>& defense_names() {
  static const std::vector<std::string> names = {"none", "est",   "rest", "ses",
                                                 "act",  "madry", "hm",   "mdprop"};
  return names;
}

bool needs_triplet_loss(const std::string& name) {
  return name == "act" || name == "rest" || name == "madry" || name == "hm";
}

namespace {

void check_finite_at_least(double value, double minimum, const char* what) {
  ENGINE_CHECK(std::isfinite(value) && value >= minimum, "defense option ", what,
               " must be a finite number >= ", minimum, ", got ", value);
}

}  // namespace

void validate(const DefenseOptions& options) {
  const std::vector<std::string>& names = defense_names();
  ENGINE_CHECK(std::find(names.begin(), names.end(), options.name) != names.end(),
               "defense: unknown recipe '", options.name,
               "' (none, est, rest, ses, act, madry, hm, mdprop)");
  check_finite_at_least(options.pgd.eps, 0.0, "pgd.eps");
  check_finite_at_least(options.pgd.alpha, 0.0, "pgd.alpha");
  ENGINE_CHECK(options.pgd.steps >= 1, "defense option pgd.steps must be >= 1, got ",
               options.pgd.steps);
  check_finite_at_least(options.ses_weight, 0.0, "ses_weight");
  if (options.name == "hm") validate_hm(options.hm);
  if (options.name == "mdprop") {
    ENGINE_CHECK(!options.mdprop.targets.empty(),
                 "defense option mdprop.targets must name at least one adversarial branch");
    for (int64_t t : options.mdprop.targets) {
      ENGINE_CHECK(t >= 1, "defense option mdprop.targets: every entry must be >= 1, got ", t);
    }
    ENGINE_CHECK(options.mdprop.reduction == "sum" || options.mdprop.reduction == "mean",
                 "defense option mdprop.reduction must be sum or mean, got '",
                 options.mdprop.reduction, "'");
  }
}

void Defense::load_state(const std::map<std::string, engine::Tensor>& state) {
  const std::map<std::string, engine::Tensor> own = this->state();
  for (const auto& [key, value] : state) {
    ENGINE_CHECK(own.count(key) == 1, "defense ", name(), ": unexpected state '", key, "'");
  }
  ENGINE_CHECK(state.empty(), "defense ", name(), " has no state to load");
}

std::unique_ptr<Defense> make_defense(const DefenseOptions& options) {
  validate(options);
  const std::string& n = options.name;
  if (n == "none") return nullptr;
  if (n == "est") return make_est(options);
  if (n == "rest") return make_rest(options);
  if (n == "ses") return make_ses(options);
  if (n == "act") return make_act(options);
  if (n == "madry") return make_madry(options);
  if (n == "hm") return make_hm(options);
  return make_mdprop(options);
}

}  // namespace attacks::defenses
