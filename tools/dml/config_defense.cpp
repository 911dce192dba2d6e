// The defense section of the training config: schema and reading (config_defense.h).
#include "tools/dml/config_defense.h"

#include <cstdint>
#include <string>
#include <vector>

#include "losses/miners.h"

namespace dml {

using nlohmann::json;

json defense_schema() {
  const attacks::defenses::DefenseOptions d;
  return json{{"name", attacks::defenses::recipe_name(d.recipe)},
              {"pgd",
               {{"eps", d.pgd.eps},
                {"alpha", d.pgd.alpha},
                {"steps", d.pgd.steps},
                {"random_start", d.pgd.random_start}}},
              {"ses_weight", d.ses_weight},
              {"hm",
               {{"source", losses::miner_name(d.hm.source)},
                {"destination", attacks::defenses::hm_destination_name(d.hm)},
                {"destination_miner", losses::miner_name(d.hm.destination_miner)},
                {"objective", attacks::defenses::hm_objective_name(d.hm.objective)},
                {"gamma", d.hm.gamma},
                {"xi", d.hm.xi},
                {"initial_loss", d.hm.initial_loss},
                {"ics", d.hm.ics},
                {"ics_lambda", d.hm.ics_lambda},
                {"ics_margin", d.hm.ics_margin},
                {"loss_upper", d.hm.loss_upper},
                {"stop_tolerance", d.hm.stop_tolerance}}},
              {"mdprop",
               {{"targets", d.mdprop.targets},
                {"reduction", attacks::defenses::mdprop_reduction_name(d.mdprop.reduction)},
                {"shared_bn", d.mdprop.shared_bn}}},
              {"act", {{"anchor", attacks::defenses::act_anchor_name(d.act_anchor)}}}};
}

namespace {

// The defense.hm keys (Zhou & Patel CVPR'22's Hardness Manipulation).
attacks::defenses::HmOptions resolve_hm(const ConfigChecker& c) {
  attacks::defenses::HmOptions hm;
  hm.source = losses::parse_miner(c.one_of("defense.hm.source", losses::miner_names()));
  // destination_miner first: a miner named by hm.destination replaces it (set_hm_destination).
  hm.destination_miner =
      losses::parse_miner(c.one_of("defense.hm.destination_miner", losses::miner_names()));
  attacks::defenses::set_hm_destination(
      hm, c.one_of("defense.hm.destination", attacks::defenses::hm_destination_names()));
  hm.objective =
      attacks::defenses::parse_hm_objective(c.one_of("defense.hm.objective", {"et", "l2"}));
  hm.gamma = c.number("defense.hm.gamma", 0.0, true);
  hm.xi = c.finite("defense.hm.xi");
  hm.initial_loss = c.finite("defense.hm.initial_loss");
  hm.ics = c.flag("defense.hm.ics");
  hm.ics_lambda = c.number("defense.hm.ics_lambda", 0.0, false);
  hm.ics_margin = c.number("defense.hm.ics_margin", 0.0, false);
  hm.loss_upper = c.number("defense.hm.loss_upper", 0.0, false);
  hm.stop_tolerance = c.number("defense.hm.stop_tolerance", 0.0, false);
  return hm;
}

// The defense.mdprop keys (Singh et al.'s MDProp).
attacks::defenses::MdpropOptions resolve_mdprop(const ConfigChecker& c) {
  attacks::defenses::MdpropOptions mdprop;
  const json& targets = c.at("defense.mdprop.targets");
  mdprop.targets.clear();
  for (const json& value : targets) {
    if (!value.is_number_integer() || value.get<int64_t>() < 1) {
      c.fail("defense.mdprop.targets",
             "must be a list of integers >= 1 (targets per adversarial "
             "BN branch, e.g. [1, 5])",
             targets);
    }
    mdprop.targets.push_back(value.get<int64_t>());
  }
  if (mdprop.targets.empty()) {
    c.fail("defense.mdprop.targets", "must name at least one adversarial branch", targets);
  }
  mdprop.reduction = attacks::defenses::parse_mdprop_reduction(
      c.one_of("defense.mdprop.reduction", {"sum", "mean"}));
  mdprop.shared_bn = c.flag("defense.mdprop.shared_bn");
  return mdprop;
}

// Whether the recipe fits the rest of the config: its sampler, loss, margin and BN branches.
void check_defense_fits(const ConfigChecker& c, const attacks::defenses::DefenseOptions& d,
                        const TrainConfig& t) {
  if (attacks::defenses::needs_triplet_loss(d.recipe) && t.sampler_name != "spc2") {
    c.fail("defense.name", "mines SPC-2 triplets: it needs sampler.name \"spc2\"",
           c.at("defense.name"));
  }
  if (attacks::defenses::needs_triplet_loss(d.recipe) && t.loss != Loss::Triplet) {
    c.fail("defense.name",
           std::string("trains on triplets itself: it needs loss.name \"triplet\", not \"") +
               loss_name(t.loss) + "\"",
           c.at("defense.name"));
  }
  if (d.recipe == attacks::defenses::Recipe::Hm && d.hm.gamma != t.margin) {
    // The CVPR'22 paper's γ is both the triplet margin and the pseudo-hardness scale (robrank ties
    // both to its margin): two values would train on one and manipulate toward the other.
    c.fail("defense.hm.gamma",
           "must equal the triplet margin loss.margin = " + json(t.margin).dump() +
               " (HM's γ is both; set both, e.g. 1.0 for metric E)",
           c.at("defense.hm.gamma"));
  }
  if (d.recipe == attacks::defenses::Recipe::Mdprop && d.mdprop.shared_bn &&
      t.model.bn_branches != 1) {
    c.fail("model.bn_branches", "must be 1 for defense mdprop with mdprop.shared_bn (one BN)",
           c.at("model.bn_branches"));
  }
  if (d.recipe == attacks::defenses::Recipe::Mdprop && !d.mdprop.shared_bn) {
    if (t.model.name == "c2f2") {
      c.fail("defense.name", "needs a model with batch norm (c2f2-bn or a resnet), not c2f2",
             c.at("defense.name"));
    }
    const int64_t want = static_cast<int64_t>(d.mdprop.targets.size()) + 1;
    if (t.model.bn_branches != want) {
      c.fail("model.bn_branches",
             "must be " + std::to_string(want) + " for defense mdprop with " +
                 std::to_string(want - 1) + " adversarial branch(es) (defense.mdprop.targets)",
             c.at("model.bn_branches"));
    }
  }
}

}  // namespace

attacks::defenses::DefenseOptions resolve_defense(const ConfigChecker& c, const TrainConfig& t) {
  attacks::defenses::DefenseOptions d;
  d.recipe =
      attacks::defenses::parse_recipe(c.one_of("defense.name", attacks::defenses::defense_names()));
  d.pgd.eps = c.number("defense.pgd.eps", 0.0, false);
  if (d.pgd.eps > 1.0) {  // the rule of the attack specs (attacks/attack.h): pixels are in [0, 1]
    c.fail("defense.pgd.eps", "must be <= 1 (pixels are in [0, 1])", c.at("defense.pgd.eps"));
  }
  d.pgd.alpha = c.number("defense.pgd.alpha", 0.0, false);
  d.pgd.steps = c.integer("defense.pgd.steps", 1);
  d.pgd.random_start = c.flag("defense.pgd.random_start");
  d.ses_weight = c.number("defense.ses_weight", 0.0, false);
  d.hm = resolve_hm(c);
  d.mdprop = resolve_mdprop(c);
  d.act_anchor = attacks::defenses::parse_act_anchor(
      c.one_of("defense.act.anchor", {"normalized", "unnormalized"}));
  check_defense_fits(c, d, t);
  return d;
}

}  // namespace dml
