// AdvProp-D / MDProp (attacks/defenses/mdprop.h, mdprop.cpp): the target choice (invariants,
// uniformity, fallbacks, stream use), the eps = 0 equivalence with K clean losses, the BN routing
// of the clean and adversarial parts, a step equal to Algorithm 1 written out with public pieces
// on a twin (bit for bit), the model checks and the adversaries' direction. The step contract of
// defense.h, which every recipe shares, is in contract_test.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attacks/defenses/defense.h"
#include "attacks/defenses/mdprop.h"
#include "attacks/objectives.h"
#include "attacks/pgd.h"
#include "attacks/selection.h"
#include "engine/autograd.h"
#include "engine/nn/batch_norm.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "kernels/common/check.h"
#include "tests/defenses/fixture.h"

namespace {

using attacks::defenses::DefenseOptions;
using attacks::defenses::mdprop_pick_targets;
using attacks::defenses::StepResult;
using Catch::Contains;
using defense_test::Harness;
using engine::Tensor;
using losses::Metric;
using losses::Miner;

DefenseOptions mdprop_options(std::vector<int64_t> targets, double eps, double alpha,
                              int64_t steps) {
  DefenseOptions o = defense_test::defense_options("mdprop", eps, alpha, steps);
  o.mdprop.targets = std::move(targets);
  return o;
}

engine::nn::BatchNorm& only_bn(models::Model& model) {
  const std::vector<engine::nn::BatchNorm*> layers = engine::nn::batch_norm_layers(model);
  REQUIRE(layers.size() == 1);
  return *layers[0];
}

// Gives BN branch k (k >= 1) running statistics of its own, as after some training: mean 0.3 k
// and var 1 + 4 k j for channel j. The variance differs per channel, so branch k's eval-mode
// embedding is not a uniformly scaled and shifted copy of branch 0's (under which a squared-
// distance objective would have the same gradient signs): attacking through the wrong branch
// shows in the adversarial images.
void separate_branches(models::Model& model) {
  engine::nn::BatchNorm& bn = only_bn(model);
  const int64_t c = bn.channels();
  double* mean = bn.running_mean().data<double>();
  double* var = bn.running_var().data<double>();
  for (int64_t k = 1; k < bn.branches(); ++k) {
    for (int64_t j = 0; j < c; ++j) {
      mean[k * c + j] = 0.3 * static_cast<double>(k);
      var[k * c + j] = 1.0 + 4.0 * static_cast<double>(k * j);
    }
  }
}

}  // namespace

TEST_CASE("mdprop_pick_targets: other, pairwise different classes, n * count uniforms",
          "[defenses]") {
  const std::vector<int64_t> labels = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4};
  for (int64_t count : {1, 3, 4}) {  // 4 = every other class
    INFO("count " << count);
    engine::Generator gen(5), same(5), reference(5);
    const std::vector<int64_t> picks = mdprop_pick_targets(labels, count, gen);
    REQUIRE(picks.size() == labels.size() * static_cast<size_t>(count));
    for (size_t i = 0; i < labels.size(); ++i) {
      std::set<int64_t> classes;
      for (int64_t k = 0; k < count; ++k) {
        const int64_t j = picks[i * count + k];
        REQUIRE(j >= 0);
        REQUIRE(j < static_cast<int64_t>(labels.size()));
        CHECK(labels[j] != labels[i]);
        classes.insert(labels[j]);
      }
      CHECK(classes.size() == static_cast<size_t>(count));  // eq. 3: j != l
    }
    CHECK(mdprop_pick_targets(labels, count, same) == picks);
    // Exactly n * count uniforms: the stream ends where engine::uniform of that many leaves it.
    engine::uniform({static_cast<int64_t>(labels.size()) * count}, 0.0, 1.0, reference,
                    engine::DType::F64);
    CHECK(gen.offset == reference.offset);
    CHECK(gen.offset > 0);
  }
}

TEST_CASE("mdprop_pick_targets is the evaluation MTAX's rule", "[defenses]") {
  const std::vector<int64_t> labels = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  engine::Generator train(11), eval(11);
  CHECK(mdprop_pick_targets(labels, 3, train) ==
        attacks::select_feature_targets(labels, labels, 3, eval));
}

TEST_CASE("mdprop_pick_targets draws uniformly without replacement", "[defenses]") {
  // Row 0 of labels {0, 1, 2, 3} has candidates {1, 2, 3}; with count 2 each of the 6 ordered
  // pairs has probability 1/6. 6000 draws: 1000 expected per pair, standard deviation
  // sqrt(6000 * (1/6) * (5/6)) ~ 29; 5 standard deviations is 145 (a correct sampler fails this
  // with probability ~1e-6 per pair, and the seed is fixed).
  const std::vector<int64_t> labels = {0, 1, 2, 3};
  engine::Generator gen(77);
  std::map<std::pair<int64_t, int64_t>, int> counts;
  for (int trial = 0; trial < 6000; ++trial) {
    const std::vector<int64_t> picks = mdprop_pick_targets(labels, 2, gen);
    counts[{picks[0], picks[1]}] += 1;
  }
  CHECK(counts.size() == 6);
  for (const auto& [pair, c] : counts) {
    INFO("pair " << pair.first << ", " << pair.second);
    CHECK(pair.first != pair.second);
    CHECK(std::abs(c - 1000) < 145);
  }
}

TEST_CASE("mdprop_pick_targets: one class in the batch is an error, few classes repeat",
          "[defenses]") {
  SECTION("every image shares the label: no other class to impersonate") {
    engine::Generator gen(3);
    CHECK_THROWS_WITH(mdprop_pick_targets({5, 5, 5, 5}, 2, gen),
                      Catch::Contains("no gallery item of another class"));
  }
  SECTION("fewer other classes than count: classes reused once all are used") {
    // Rows 0-2 (label 0) have one other-class image, row 3: every pick is 3. Row 3 (label 1) has
    // one other class: its 3 picks are among rows 0-2.
    const std::vector<int64_t> labels = {0, 0, 0, 1};
    engine::Generator gen(3);
    const std::vector<int64_t> picks = mdprop_pick_targets(labels, 3, gen);
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t k = 0; k < 3; ++k) CHECK(picks[i * 3 + k] == 3);
    }
    for (int64_t k = 0; k < 3; ++k) CHECK(picks[9 + k] < 3);
  }
}

TEST_CASE("MDProp with eps = 0 on a model whose branches are copies is K times the clean loss",
          "[defenses]") {
  // Targets {1, 2}: K = 3 branches, all initialized as copies of branch 0. With eps = 0 every
  // part of [X; X^1; X^2] is X, and each branch normalizes its own rows with its own (identical)
  // parameters, so each part's embeddings equal the train-mode f(X) of branch 0 alone. The hardest
  // miner makes each part's loss independent of the mining stream.
  engine::Generator data(301);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(5, 3, data);
  for (Metric metric : {Metric::N, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    Harness h(31, 3, metric, Miner::Hardest, 311);
    Harness twin(31, 3, metric, Miner::Hardest, 311);
    engine::Generator any(1);
    const double clean = losses::spc2_triplet_loss(twin.model->forward(batch.images), batch.labels,
                                                   Miner::Hardest, metric, any)
                             .item();
    const StepResult r = attacks::defenses::make_defense(mdprop_options({1, 2}, 0.0, 0.01, 3))
                             ->step(h.context, batch.images, batch.labels);
    // Batch statistics over a slice of the concatenated batch vs over X alone: the same sums
    // in the same order, but allow a few ulps.
    CHECK(defense_test::log_value(r, "clean_loss") == Approx(clean).epsilon(1e-14));
    CHECK(defense_test::log_value(r, "adversarial_loss_1") == Approx(clean).epsilon(1e-14));
    CHECK(defense_test::log_value(r, "adversarial_loss_2") == Approx(clean).epsilon(1e-14));
    CHECK(r.loss.item() == Approx(3.0 * clean).epsilon(1e-14));
    // reduction "mean" (eq. 5): the same parts, averaged over the K = 3 branches.
    Harness mean_h(31, 3, metric, Miner::Hardest, 311);
    DefenseOptions mean_options = mdprop_options({1, 2}, 0.0, 0.01, 3);
    mean_options.mdprop.reduction = attacks::defenses::MdpropReduction::Mean;
    const StepResult m = attacks::defenses::make_defense(mean_options)
                             ->step(mean_h.context, batch.images, batch.labels);
    CHECK(m.loss.item() == Approx(clean).epsilon(1e-14));
    CHECK(defense_test::log_value(m, "adversarial_loss_2") == Approx(clean).epsilon(1e-14));
  }
}

TEST_CASE(
    "MDProp routes the clean part to BN branch 0 and adversarial part k to branch k, then "
    "resets the routing",
    "[defenses]") {
  engine::Generator data(321);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(5, 3, data);
  Harness h(32, 3, Metric::N, Miner::Semihard, 331);
  Harness twin(32, 3, Metric::N, Miner::Semihard, 331);
  engine::nn::BatchNorm& bn = only_bn(*h.model);
  const std::vector<double> mean0 = bn.running_mean().to_vector();
  const std::vector<double> var0 = bn.running_var().to_vector();
  const StepResult r = attacks::defenses::make_defense(mdprop_options({1, 2}, 0.1, 0.02, 3))
                           ->step(h.context, batch.images, batch.labels);
  CHECK(r.passes == 7);
  CHECK(bn.routes().empty());
  CHECK(bn.eval_branch() == 0);
  CHECK(bn.num_batches_tracked().to_indices() == std::vector<int64_t>{1, 1, 1});

  // Branch 0 saw exactly the clean images: its running statistics equal the twin's after one
  // train-mode forward of X (momentum 0.1 from mean 0, var 1).
  twin.model->forward(batch.images);
  engine::nn::BatchNorm& twin_bn = only_bn(*twin.model);
  const std::vector<double> mean = bn.running_mean().to_vector();
  const std::vector<double> var = bn.running_var().to_vector();
  const std::vector<double> twin_mean = twin_bn.running_mean().to_vector();
  const std::vector<double> twin_var = twin_bn.running_var().to_vector();
  const int64_t c = bn.channels();
  for (int64_t j = 0; j < c; ++j) {
    INFO("channel " << j);
    CHECK(mean[j] == Approx(twin_mean[j]).margin(1e-15));
    CHECK(var[j] == Approx(twin_var[j]).margin(1e-15));
  }
  // Branches 1 and 2 moved away from their initial values, to statistics of their own (the
  // adversarial images differ from X and from each other).
  for (int64_t k = 1; k < 3; ++k) {
    double moved = 0.0, from_clean = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      moved = std::max(moved, std::fabs(mean[k * c + j] - mean0[k * c + j]) +
                                  std::fabs(var[k * c + j] - var0[k * c + j]));
      from_clean = std::max(from_clean, std::fabs(mean[k * c + j] - mean[j]));
    }
    INFO("branch " << k);
    CHECK(moved > 1e-3);
    CHECK(from_clean > 1e-6);
  }
  double between = 0.0;
  for (int64_t j = 0; j < c; ++j)
    between = std::max(between, std::fabs(mean[c + j] - mean[2 * c + j]));
  CHECK(between > 1e-6);
}

TEST_CASE(
    "MDProp's step is Algorithm 1 written out: per-branch targeted PGD, one routed "
    "forward, the sum of the parts' losses",
    "[defenses]") {
  // The recipe (mdprop.cpp header, MDProp Algorithm 1) re-derived from public pieces on a twin
  // with the same weights and stream: for branch k, T_k targets per image (mdprop_pick_targets,
  // from the stream), their eval-mode embeddings through branch k, PGD (attacks/pgd.h) through
  // branch k descending attacks::feature_targeted_loss on L2-normalized embeddings (the loss's
  // metric is N); then one train-mode forward of
  // [X; X^1; X^2] with rows [kn, (k+1)n) routed to branch k; loss = sum_k L(part k), each L
  // mining from the stream in part order. Distinct target counts {1, 3} make the branches'
  // adversarial images differ, so a swapped route or branch changes the loss and statistics; the
  // branches' running statistics are made distinct first, so attacking (or picking the targets'
  // embeddings) through the wrong branch changes the adversarial images.
  engine::Generator data(391);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(5, 3, data);
  const std::vector<int64_t> counts = {1, 3};
  Harness h(36, 3, Metric::N, Miner::Semihard, 401);
  Harness twin(36, 3, Metric::N, Miner::Semihard, 401);
  separate_branches(*h.model);
  separate_branches(*twin.model);
  const attacks::PgdOptions pgd{0.15, 0.03, 4, false, 0, 0.0};
  DefenseOptions o = mdprop_options(counts, pgd.eps, pgd.alpha, pgd.steps);

  models::Model& m = *twin.model;
  engine::Generator& stream = twin.mining;
  const int64_t n = batch.images.size(0);
  std::vector<Tensor> parts = {batch.images};
  for (int64_t k = 1; k <= 2; ++k) {
    const int64_t count = counts[k - 1];
    const Tensor index = Tensor::from_indices(
        mdprop_pick_targets(batch.labels.to_indices(), count, stream), {n * count});
    engine::nn::set_batch_norm_eval_branch(m, k);
    m.eval();
    Tensor targets;
    {
      engine::NoGradGuard no_grad;
      targets = engine::index_select(engine::l2_normalize(m.forward(batch.images)), index)
                    .reshape({n, count, -1});
    }
    parts.push_back(attacks::pgd_attack(
        batch.images,
        [&](const Tensor& x, int64_t) {
          return attacks::feature_targeted_loss(engine::l2_normalize(m.forward(x)), targets);
        },
        pgd));
    m.train();
    engine::nn::set_batch_norm_eval_branch(m, 0);
  }
  engine::nn::set_batch_norm_routes(m, {{0, n, 0}, {n, 2 * n, 1}, {2 * n, 3 * n, 2}});
  const Tensor e = m.forward(engine::concat(parts, 0));
  engine::nn::set_batch_norm_routes(m, {});
  std::vector<double> part_losses;
  for (int64_t k = 0; k < 3; ++k) {
    part_losses.push_back(
        twin.context.loss(e.slice(0, k * n, (k + 1) * n), batch.labels, stream).item());
  }
  const double expected = part_losses[0] + part_losses[1] + part_losses[2];

  const StepResult r =
      attacks::defenses::make_defense(o)->step(h.context, batch.images, batch.labels);
  // The same operations in the same order on the same values: bit-identical.
  CHECK(r.loss.item() == expected);
  CHECK(defense_test::log_value(r, "clean_loss") == part_losses[0]);
  CHECK(defense_test::log_value(r, "adversarial_loss_1") == part_losses[1]);
  CHECK(defense_test::log_value(r, "adversarial_loss_2") == part_losses[2]);
  CHECK(h.mining.offset == stream.offset);
  CHECK(only_bn(*h.model).running_mean().to_vector() ==
        only_bn(*twin.model).running_mean().to_vector());
  CHECK(only_bn(*h.model).running_var().to_vector() ==
        only_bn(*twin.model).running_var().to_vector());
  // The premise that makes the routing visible: the two adversarial parts differ.
  REQUIRE(defense_test::max_abs_difference(parts[1], parts[2]) > 1e-3);
  REQUIRE(std::fabs(part_losses[1] - part_losses[2]) > 1e-6);
}

TEST_CASE("MDProp rejects a model with the wrong number of BN branches or without BN",
          "[defenses]") {
  engine::Generator data(341);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(3, 3, data);
  const auto mdprop = attacks::defenses::make_defense(mdprop_options({1, 2}, 0.1, 0.02, 2));
  Harness two(33, 2, Metric::N, Miner::Semihard, 351);  // needs 3
  CHECK_THROWS_AS(mdprop->step(two.context, batch.images, batch.labels), engine::Error);
  CHECK_THROWS_WITH(mdprop->step(two.context, batch.images, batch.labels),
                    Contains("mdprop") && Contains("bn_branches"));
  Harness none(33, 0, Metric::N, Miner::Semihard, 351);
  CHECK_THROWS_AS(mdprop->step(none.context, batch.images, batch.labels), engine::Error);
  CHECK_THROWS_WITH(mdprop->step(none.context, batch.images, batch.labels),
                    Contains("mdprop") && Contains("batch norm"));
}

TEST_CASE("MDProp's adversaries move each branch's embeddings toward their targets", "[defenses]") {
  // attack_objective_k = mean_i (1/T) sum_j ||f_k(x~_i) - f_k(x_t_ij)||^2 before the last step,
  // f_k the L2-normalized embedding (the loss's metric is N). At the clean images it is
  // recomputed here: the targets from the same stream (branch 1's T = 1 picks first, then branch
  // 2's T = 2), f_k in eval mode = the initial running statistics, which every branch shares
  // with branch 0 of a fresh twin.
  engine::Generator data(361);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(5, 3, data);
  Harness twin(34, 3, Metric::N, Miner::Semihard, 371);
  twin.model->eval();
  const defense_test::Rows e =
      defense_test::host_rows(engine::l2_normalize(twin.model->forward(batch.images)));
  const std::vector<int64_t> labels = batch.labels.to_indices();
  engine::Generator copy = twin.mining;  // MDProp's first draws: branch 1's picks, then 2's
  double clean_value[3] = {0.0, 0.0, 0.0};
  for (int64_t k = 1; k <= 2; ++k) {
    const std::vector<int64_t> t = mdprop_pick_targets(labels, k, copy);  // T = k here
    for (size_t i = 0; i < labels.size(); ++i) {
      for (int64_t j = 0; j < k; ++j) {
        const std::vector<double>& target = e[t[i * k + j]];
        for (size_t d = 0; d < target.size(); ++d) {
          clean_value[k] += (e[i][d] - target[d]) * (e[i][d] - target[d]) / static_cast<double>(k);
        }
      }
    }
    clean_value[k] /= static_cast<double>(labels.size());
  }
  auto run = [&](int64_t steps) {
    Harness fresh(34, 3, Metric::N, Miner::Semihard, 371);
    return attacks::defenses::make_defense(mdprop_options({1, 2}, 0.2, 0.02, steps))
        ->step(fresh.context, batch.images, batch.labels);
  };
  const StepResult one = run(1), five = run(5);
  for (int64_t k = 1; k <= 2; ++k) {
    INFO("branch " << k);
    const std::string key = "attack_objective_" + std::to_string(k);
    REQUIRE(clean_value[k] > 0.01);
    // One step logs the objective at the clean images (before the step): the formula itself.
    // 1e-12: host vs engine arithmetic on O(1) values.
    CHECK(defense_test::log_value(one, key) == Approx(clean_value[k]).margin(1e-12));
    CHECK(defense_test::log_value(five, key) < clean_value[k] * 0.9);
  }
}

TEST_CASE(
    "mdprop.shared_bn (MDProp Appendix C.2's baselines): the adversaries and one unrouted "
    "forward through a single BN",
    "[defenses]") {
  // Algorithm 1 with every branch index replaced by the one shared BN: targets T = 3 (MTAX
  // without separate BNs), adversary through BN 0 in eval mode, then one train-mode forward of
  // [X; X^1] with no routes (joint batch statistics), loss = L(clean part) + L(adversarial part).
  engine::Generator data(393);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(5, 3, data);
  Harness h(37, 1, Metric::N, Miner::Semihard, 403);
  Harness twin(37, 1, Metric::N, Miner::Semihard, 403);
  const attacks::PgdOptions pgd{0.15, 0.03, 4, false, 0, 0.0};
  DefenseOptions o = mdprop_options({3}, pgd.eps, pgd.alpha, pgd.steps);
  o.mdprop.shared_bn = true;

  models::Model& m = *twin.model;
  engine::Generator& stream = twin.mining;
  const int64_t n = batch.images.size(0);
  const Tensor index =
      Tensor::from_indices(mdprop_pick_targets(batch.labels.to_indices(), 3, stream), {n * 3});
  m.eval();
  Tensor targets;
  {
    engine::NoGradGuard no_grad;
    targets = engine::index_select(engine::l2_normalize(m.forward(batch.images)), index)
                  .reshape({n, 3, -1});
  }
  const Tensor adversarial = attacks::pgd_attack(
      batch.images,
      [&](const Tensor& x, int64_t) {
        return attacks::feature_targeted_loss(engine::l2_normalize(m.forward(x)), targets);
      },
      pgd);
  m.train();
  const Tensor e = m.forward(engine::concat({batch.images, adversarial}, 0));
  const double clean = twin.context.loss(e.slice(0, 0, n), batch.labels, stream).item();
  const double adv = twin.context.loss(e.slice(0, n, 2 * n), batch.labels, stream).item();

  const StepResult r =
      attacks::defenses::make_defense(o)->step(h.context, batch.images, batch.labels);
  CHECK(r.loss.item() == clean + adv);
  CHECK(defense_test::log_value(r, "clean_loss") == clean);
  CHECK(defense_test::log_value(r, "adversarial_loss_1") == adv);
  CHECK(only_bn(*h.model).running_mean().to_vector() ==
        only_bn(*twin.model).running_mean().to_vector());

  // Separate branches are refused with shared_bn; without it one branch is refused as before.
  Harness two(37, 2, Metric::N, Miner::Semihard, 403);
  CHECK_THROWS_WITH(
      attacks::defenses::make_defense(o)->step(two.context, batch.images, batch.labels),
      Contains("shared_bn") && Contains("bn_branches = 1"));
  o.mdprop.shared_bn = false;
  Harness one(37, 1, Metric::N, Miner::Semihard, 403);
  CHECK_THROWS_WITH(
      attacks::defenses::make_defense(o)->step(one.context, batch.images, batch.labels),
      Contains("bn_branches = 2"));
}
