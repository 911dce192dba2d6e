// Recipe names, option validation and the factory (defense.h).
#include "attacks/defenses/defense.h"

#include <cmath>
#include <optional>
#include <utility>

#include "attacks/defenses/hm.h"
#include "attacks/defenses/recipes.h"
#include "kernels/common/check.h"

namespace attacks::defenses {

namespace {

// Every recipe with its config name, in docs order ("none" first).
const std::vector<std::pair<std::string, Recipe>>& recipe_names() {
  static const std::vector<std::pair<std::string, Recipe>> names = {
      {"none", Recipe::None}, {"est", Recipe::Est},      {"rest", Recipe::Rest},
      {"ses", Recipe::Ses},   {"act", Recipe::Act},      {"madry", Recipe::Madry},
      {"hm", Recipe::Hm},     {"mdprop", Recipe::Mdprop}};
  return names;
}

}  // namespace

const std::vector<std::string>& defense_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : recipe_names()) out.push_back(entry.first);
    return out;
  }();
  return names;
}

Recipe parse_recipe(const std::string& name) {
  std::string known;
  for (const auto& [known_name, recipe] : recipe_names()) {
    if (name == known_name) return recipe;
    known += (known.empty() ? "" : ", ") + known_name;
  }
  engine::fail("defense: unknown recipe '", name, "' (", known, ")");
}

const char* recipe_name(Recipe recipe) {
  for (const auto& entry : recipe_names()) {
    if (entry.second == recipe) return entry.first.c_str();
  }
  return "?";
}

bool needs_triplet_loss(Recipe recipe) {
  return recipe == Recipe::Act || recipe == Recipe::Rest || recipe == Recipe::Madry ||
         recipe == Recipe::Hm;
}

HmObjective parse_hm_objective(const std::string& name) {
  if (name == "et") return HmObjective::Et;
  if (name == "l2") return HmObjective::L2;
  engine::fail("defense option hm.objective '", name, "' must be et or l2");
}

const char* hm_objective_name(HmObjective objective) {
  return objective == HmObjective::Et ? "et" : "l2";
}

namespace {

// The pseudo-hardness functions of hm.destination, by config name.
const std::vector<std::pair<std::string, HmDestination>>& pseudo_hardness_names() {
  static const std::vector<std::pair<std::string, HmDestination>> names = {
      {"g_b", HmDestination::GB},
      {"g_lga", HmDestination::GLga},
      {"g_2", HmDestination::G2},
      {"g_sqrt", HmDestination::GSqrt},
      {"const_0", HmDestination::Const0},
      {"const_half_gamma", HmDestination::ConstHalfGamma},
      {"const_gamma", HmDestination::ConstGamma}};
  return names;
}

}  // namespace

void set_hm_destination(HmOptions& hm, const std::string& name) {
  for (const auto& [pseudo_name, destination] : pseudo_hardness_names()) {
    if (name == pseudo_name) {
      hm.destination = destination;
      return;
    }
  }
  const std::optional<losses::Miner> miner = losses::find_miner(name);
  if (!miner) {
    engine::fail("defense option hm.destination '", name,
                 "' is neither a miner nor one of g_b, g_lga, g_2, g_sqrt, const_0, "
                 "const_half_gamma, const_gamma");
  }
  hm.destination_miner = *miner;
  hm.destination = HmDestination::Miner;
}

std::string hm_destination_name(const HmOptions& hm) {
  if (hm.destination == HmDestination::Miner) return losses::miner_name(hm.destination_miner);
  for (const auto& [pseudo_name, destination] : pseudo_hardness_names()) {
    if (hm.destination == destination) return pseudo_name;
  }
  return "?";
}

std::vector<std::string> hm_destination_names() {
  std::vector<std::string> names = losses::miner_names();
  for (const auto& entry : pseudo_hardness_names()) names.push_back(entry.first);
  return names;
}

MdpropReduction parse_mdprop_reduction(const std::string& name) {
  if (name == "sum") return MdpropReduction::Sum;
  if (name == "mean") return MdpropReduction::Mean;
  engine::fail("defense option mdprop.reduction must be sum or mean, got '", name, "'");
}

const char* mdprop_reduction_name(MdpropReduction reduction) {
  return reduction == MdpropReduction::Sum ? "sum" : "mean";
}

ActAnchor parse_act_anchor(const std::string& name) {
  if (name == "normalized") return ActAnchor::Normalized;
  if (name == "unnormalized") return ActAnchor::Unnormalized;
  engine::fail("defense option act.anchor must be normalized or unnormalized, got '", name, "'");
}

const char* act_anchor_name(ActAnchor anchor) {
  return anchor == ActAnchor::Normalized ? "normalized" : "unnormalized";
}

namespace {

void check_finite_at_least(double value, double minimum, const char* what) {
  ENGINE_CHECK(std::isfinite(value) && value >= minimum, "defense option ", what,
               " must be a finite number >= ", minimum, ", got ", value);
}

}  // namespace

void validate(const DefenseOptions& options) {
  check_finite_at_least(options.pgd.eps, 0.0, "pgd.eps");
  check_finite_at_least(options.pgd.alpha, 0.0, "pgd.alpha");
  ENGINE_CHECK(options.pgd.steps >= 1, "defense option pgd.steps must be >= 1, got ",
               options.pgd.steps);
  check_finite_at_least(options.ses_weight, 0.0, "ses_weight");
  if (options.recipe == Recipe::Hm) validate_hm(options.hm);
  if (options.recipe == Recipe::Mdprop) {
    ENGINE_CHECK(!options.mdprop.targets.empty(),
                 "defense option mdprop.targets must name at least one adversarial branch");
    for (int64_t t : options.mdprop.targets) {
      ENGINE_CHECK(t >= 1, "defense option mdprop.targets: every entry must be >= 1, got ", t);
    }
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
  switch (options.recipe) {
    case Recipe::None:
      return nullptr;
    case Recipe::Est:
      return make_est(options);
    case Recipe::Rest:
      return make_rest(options);
    case Recipe::Ses:
      return make_ses(options);
    case Recipe::Act:
      return make_act(options);
    case Recipe::Madry:
      return make_madry(options);
    case Recipe::Hm:
      return make_hm(options);
    case Recipe::Mdprop:
      return make_mdprop(options);
  }
  engine::fail("make_defense: unknown recipe ", static_cast<int>(options.recipe));
}

}  // namespace attacks::defenses
