// What every adversarial-training recipe (attacks/defenses/) promises, checked once over a table
// of recipes instead of once per recipe file:
//   - the step contract of defense.h (passes, train mode, no weight gradient, a differentiable
//     one-element loss) for every recipe and variant;
//   - ACT, REST and Madry with eps = 0: the triplet loss of triplets mined with robrank's adversary
//     band, embedded in the recipe's own grouping of train-mode forwards;
//   - the adversaries' direction: one PGD step logs the objective at the clean images (by hand
//     for ACT and Madry, the ES objective's 1e-6 floor for EST, REST and SES) and more steps
//     lower it.
// The per-recipe files (act_test.cpp, ...) keep what only that recipe does.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attacks/defenses/common.h"
#include "attacks/defenses/defense.h"
#include "engine/ops.h"
#include "tests/defenses/fixture.h"

namespace {

using attacks::defenses::DefenseOptions;
using attacks::defenses::StepResult;
using defense_test::Harness;
using engine::Tensor;
using losses::Metric;
using losses::Miner;

// One row of the step contract: a recipe configured as `dml train` would, on a model with the BN
// branches it needs. It runs `attacks` PGD attacks per step, so passes = attacks * steps + 1.
struct RecipeCase {
  std::string label;
  DefenseOptions options;  // pgd.steps is set by the test
  int64_t bn_branches;
  int64_t attacks;
};

std::vector<RecipeCase> recipe_cases() {
  auto recipe = [](const std::string& name) {
    return defense_test::defense_options(name, 0.1, 0.02, 1);
  };
  DefenseOptions hm = recipe("hm");
  hm.hm.source = losses::parse_miner("softhard");
  attacks::defenses::set_hm_destination(hm.hm, "g_lga");
  hm.hm.stop_tolerance = 0.0;  // no early stop: exactly `steps` steps
  DefenseOptions hm_ics = hm;
  hm_ics.hm.ics = true;
  DefenseOptions advprop = recipe("mdprop");
  advprop.mdprop.targets = {1};
  DefenseOptions mdprop = recipe("mdprop");
  mdprop.mdprop.targets = {1, 3};
  return {{"est", recipe("est"), 1, 1},
          {"rest", recipe("rest"), 1, 1},
          {"ses", recipe("ses"), 1, 1},
          {"act", recipe("act"), 1, 1},
          {"madry", recipe("madry"), 1, 1},
          {"hm", hm, 1, 1},
          {"hm with ics", hm_ics, 1, 1},
          {"AdvProp-D, targets {1}", advprop, 2, 1},
          {"MDProp, targets {1, 3}", mdprop, 3, 2}};
}

// How a triplet recipe embeds [A; P~; N~] in train mode (with BN, each forward normalizes with
// the statistics of its own rows, so the grouping changes the loss).
enum class Forwards {
  OneForward,    // REST and Madry: one forward of the 3B rows
  AnchorsApart,  // ACT: f([P; N]) first, then f(A)
};

// The triplet loss of the rows of `t` embedded by a fresh twin as `forwards` groups them.
double grouped_triplet_loss(Harness& twin, const Tensor& images, const losses::Triplets& t,
                            Metric metric, Forwards forwards) {
  if (forwards == Forwards::OneForward) {
    return defense_test::one_forward_triplet_loss(twin, images, t, metric);
  }
  const int64_t b = t.size();
  const Tensor pn = twin.model->forward(
      engine::index_select(images, engine::concat({t.positive, t.negative}, 0)));
  const Tensor a = twin.model->forward(engine::index_select(images, t.anchor));
  return losses::triplet_loss_rows(a, pn.slice(0, 0, b), pn.slice(0, b, 2 * b), metric,
                                   losses::default_margin(metric))
      .item();
}

struct TripletRecipe {
  const char* name;
  Forwards forwards;
};

// ACT's adversary collapses each positive onto its negative: mean_i d(p_i, n_i).
double act_objective(Metric metric, const defense_test::Rows& rows, const losses::Triplets& t) {
  const std::vector<int64_t> p = t.positive.to_indices(), n = t.negative.to_indices();
  double value = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    value += defense_test::metric_distance(metric, rows[p[i]], rows[n[i]]);
  }
  return value / static_cast<double>(p.size());
}

// Madry's adversary hardens the triplets: -mean_i (d(a_i, p_i) - d(a_i, n_i)).
double madry_objective(Metric metric, const defense_test::Rows& rows, const losses::Triplets& t) {
  const std::vector<int64_t> a = t.anchor.to_indices(), p = t.positive.to_indices(),
                             n = t.negative.to_indices();
  double value = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    value -= defense_test::metric_distance(metric, rows[a[i]], rows[p[i]]) -
             defense_test::metric_distance(metric, rows[a[i]], rows[n[i]]);
  }
  return value / static_cast<double>(a.size());
}

struct TripletAdversary {
  const char* name;
  double (*clean_objective)(Metric, const defense_test::Rows&, const losses::Triplets&);
};

}  // namespace

TEST_CASE(
    "every recipe: passes = PGD steps + 1 per attack, train mode, no weight gradient, "
    "differentiable loss",
    "[defenses]") {
  const RecipeCase recipe = GENERATE(from_range(recipe_cases()));
  const int64_t steps = GENERATE(as<int64_t>{}, 1, 4);
  INFO(recipe.label << ", steps " << steps);
  engine::Generator data(82);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(4, 2, data);
  Harness h(21, recipe.bn_branches, Metric::N, Miner::Semihard, 92);
  DefenseOptions o = recipe.options;
  o.pgd.steps = steps;
  const StepResult r =
      attacks::defenses::make_defense(o)->step(h.context, batch.images, batch.labels);
  defense_test::check_step_contract(*h.model, r, recipe.attacks * steps + 1);
}

TEST_CASE(
    "ACT, REST and Madry with eps = 0 are the triplet loss on triplets mined with band 1.0 for "
    "N, 0.2 for C, embedded in the recipe's forwards",
    "[defenses]") {
  // A BN model (one branch): mining must use the eval-mode (running statistics) embeddings, and
  // the loss the recipe's grouping of train-mode forwards (batch statistics per forward).
  const TripletRecipe recipe = GENERATE(values<TripletRecipe>({{"act", Forwards::AnchorsApart},
                                                               {"rest", Forwards::OneForward},
                                                               {"madry", Forwards::OneForward}}));
  const Forwards other_forwards =
      recipe.forwards == Forwards::OneForward ? Forwards::AnchorsApart : Forwards::OneForward;
  engine::Generator data(21);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  for (Metric metric : {Metric::N, Metric::C}) {
    INFO(recipe.name << ", metric " << losses::metric_name(metric));
    const double band = metric == Metric::C ? 0.2 : 1.0;  // band 1.0: docs/defenses.md
    const double other_band = metric == Metric::C ? 1.0 : 0.2;
    Harness h(11, 1, metric, Miner::Semihard, 31);
    Harness twin(11, 1, metric, Miner::Semihard, 31);
    Harness twin_other_band(11, 1, metric, Miner::Semihard, 31);
    Harness twin_other_forwards(11, 1, metric, Miner::Semihard, 31);
    // Expected: mine on the clean eval-mode embeddings with the same stream (the recipe mines
    // first).
    twin.model->eval();
    const Tensor clean = twin.model->forward(batch.images);
    twin.model->train();
    engine::Generator g1 = h.mining, g2 = h.mining;
    const losses::Triplets t =
        losses::mine_triplets(clean, batch.labels, Miner::Semihard, metric, g1, band);
    const losses::Triplets t_other =
        losses::mine_triplets(clean, batch.labels, Miner::Semihard, metric, g2, other_band);
    // The premises that make the band and the grouping matter: the two bands pick different
    // negatives here, and the losses on them differ; the other grouping of the forwards gives
    // another loss.
    REQUIRE(t.negative.to_indices() != t_other.negative.to_indices());
    const double expected = grouped_triplet_loss(twin, batch.images, t, metric, recipe.forwards);
    REQUIRE(std::fabs(expected - grouped_triplet_loss(twin_other_band, batch.images, t_other,
                                                      metric, recipe.forwards)) > 1e-6);
    REQUIRE(std::fabs(expected - grouped_triplet_loss(twin_other_forwards, batch.images, t, metric,
                                                      other_forwards)) > 1e-6);

    const StepResult r =
        attacks::defenses::make_defense(defense_test::defense_options(recipe.name, 0.0, 0.01, 3))
            ->step(h.context, batch.images, batch.labels);
    // Bit-identical: eps = 0 leaves every pixel exactly as it was (x0 + clip(., -0, 0)), and the
    // same forwards and loss run on the same rows.
    CHECK(r.loss.item() == expected);
    CHECK(defense_test::log_value(r, "adversarial_loss") == expected);
  }
}

TEST_CASE(
    "ACT's and Madry's adversaries: one step logs the objective at the clean images, five steps "
    "lower it",
    "[defenses]") {
  // The objective at the clean images is recomputed here from the same mined triplets (the recipe
  // mines first, from the stream, with the adversary's band) and host-side distances.
  const TripletAdversary recipe =
      GENERATE(values<TripletAdversary>({{"act", act_objective}, {"madry", madry_objective}}));
  engine::Generator data(81);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO(recipe.name << ", metric " << losses::metric_name(metric));
    Harness h(20, 0, metric, Miner::Semihard, 91);  // for the clean side only
    const Tensor clean = h.model->forward(batch.images).detach();
    engine::Generator copy = h.mining;
    const losses::Triplets t =
        losses::mine_triplets(clean, batch.labels, Miner::Semihard, metric, copy,
                              attacks::defenses::adversary_mining_margin(metric));
    const double clean_value = recipe.clean_objective(metric, defense_test::host_rows(clean), t);
    // 1e-12: host vs engine arithmetic on O(1) values.
    CHECK(defense_test::attack_objective_after(recipe.name, 1, 20, metric, Miner::Semihard, 91,
                                               batch) == Approx(clean_value).margin(1e-12));
    CHECK(defense_test::attack_objective_after(recipe.name, 5, 20, metric, Miner::Semihard, 91,
                                               batch) < clean_value - 0.01);
  }
}

TEST_CASE(
    "the ES adversaries of EST, REST and SES: one step logs the clean ES objective, five steps "
    "lower it",
    "[defenses]") {
  // attack_objective = -mean_i d(f^(x~_i), f^(x_i)) (over the whole batch for EST and SES, the
  // 2B positives and negatives for REST) before the last step: with one step the clean images'
  // value (fixture.h check_clean_es_objective: about -2e-6 for N and E, ~0 for C); after 4 steps
  // of 0.02 the embeddings have moved by O(0.1).
  const char* name = GENERATE("est", "rest", "ses");
  engine::Generator data(21);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO(name << ", metric " << losses::metric_name(metric));
    const double one =
        defense_test::attack_objective_after(name, 1, 11, metric, Miner::Semihard, 31, batch);
    defense_test::check_clean_es_objective(one, metric);
    CHECK(defense_test::attack_objective_after(name, 5, 11, metric, Miner::Semihard, 31, batch) <
          one - 1e-3);
  }
}
