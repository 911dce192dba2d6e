// Hardness Manipulation (attacks/defenses/hm.h, hm.cpp): the pseudo-hardness destinations by
// hand, option validation, no attack when the destination is the source miner, the ET early stop,
// the gradual adversary's previous-loss state (and its checkpoint round trip), miner
// destinations, ICS, the adversary's direction, two gradual steps equal to hm.h's math written out
// with public pieces on a twin (bit for bit). The step contract of defense.h, which every recipe
// shares, is in contract_test.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "attacks/defenses/common.h"
#include "attacks/defenses/defense.h"
#include "attacks/defenses/hm.h"
#include "attacks/pgd.h"
#include "engine/nn/batch_norm.h"
#include "engine/ops.h"
#include "kernels/common/check.h"
#include "tests/defenses/fixture.h"

namespace {

using attacks::defenses::DefenseOptions;
using attacks::defenses::HmOptions;
using attacks::defenses::StepResult;
using Catch::Contains;
using defense_test::Harness;
using defense_test::one_forward_triplet_loss;  // HM's training forward when nothing moved
using engine::Tensor;
using losses::Metric;
using losses::Miner;

Tensor f64(const std::vector<double>& values) {
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())}, engine::DType::F64);
}

std::vector<double> destination(const std::string& name, double previous_loss,
                                const std::vector<double>& miner_hardness = {}) {
  HmOptions o;  // gamma 0.2, xi 0.1
  attacks::defenses::set_hm_destination(o, name);
  return attacks::defenses::hm_destination_hardness(
             o, f64({previous_loss}), miner_hardness.empty() ? Tensor() : f64(miner_hardness))
      .to_vector();
}

DefenseOptions hm_options(const std::string& source, const std::string& dest, double eps,
                          double alpha, int64_t steps) {
  DefenseOptions o = defense_test::defense_options("hm", eps, alpha, steps);
  o.hm.source = losses::parse_miner(source);
  attacks::defenses::set_hm_destination(o.hm, dest);
  return o;
}

// H = d(a, p) - d(a, n) per triplet of `t` on the clean embeddings, with the loss distance.
std::vector<double> host_hardness(const Tensor& clean, const losses::Triplets& t, Metric metric) {
  const defense_test::Rows rows = defense_test::host_rows(clean);
  const std::vector<int64_t> a = t.anchor.to_indices(), p = t.positive.to_indices(),
                             n = t.negative.to_indices();
  std::vector<double> h;
  for (size_t i = 0; i < a.size(); ++i) {
    h.push_back(defense_test::metric_distance(metric, rows[a[i]], rows[p[i]]) -
                defense_test::metric_distance(metric, rows[a[i]], rows[n[i]]));
  }
  return h;
}

double mean(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// HM mines on the clean eval-mode embeddings, normalized for N (hm.h step 1).
Tensor hm_clean(Harness& twin, const Tensor& images, Metric metric) {
  twin.model->eval();
  const Tensor clean = losses::embed_for_metric(twin.model->forward(images), metric).detach();
  twin.model->train();
  return clean;
}

}  // namespace

TEST_CASE("hm_destination_hardness: every pseudo-hardness by hand", "[defenses]") {
  // gamma = 0.2, xi = 0.1. Previous loss 0.1 -> l = clamp(0.1, 0, 0.2) / 0.2 = 0.5 (exact in
  // binary: 0.2 is twice 0.1). Tolerance 1e-15: one or two roundings of values <= 0.4.
  const double tol = 1e-15;
  CHECK(destination("g_lga", 0.1)[0] == Approx(-0.1).margin(tol));  // -gamma l
  CHECK(destination("g_2", 0.1)[0] == Approx(-0.05).margin(tol));   // -gamma l^2
  CHECK(destination("g_sqrt", 0.1)[0] == Approx(-0.2 * std::sqrt(0.5)).margin(tol));
  CHECK(destination("const_0", 0.1)[0] == Approx(0.0).margin(tol));
  CHECK(destination("const_half_gamma", 0.1)[0] == Approx(-0.1).margin(tol));
  CHECK(destination("const_gamma", 0.1)[0] == Approx(-0.2).margin(tol));
  // g_b = H_D + xi (1 - l) = H_D + 0.05, per triplet.
  const std::vector<double> gb = destination("g_b", 0.1, {0.3, -0.1});
  REQUIRE(gb.size() == 2);
  CHECK(gb[0] == Approx(0.35).margin(tol));
  CHECK(gb[1] == Approx(-0.05).margin(tol));
  for (const char* name :
       {"g_lga", "g_2", "g_sqrt", "const_0", "const_half_gamma", "const_gamma"}) {
    INFO(name);
    CHECK(destination(name, 0.1).size() == 1);  // [1] for the functions of l alone
  }

  // Previous loss 3.0 clamps to l = 1: every function of l reaches -gamma, g_b adds nothing.
  CHECK(destination("g_lga", 3.0)[0] == Approx(-0.2).margin(tol));
  CHECK(destination("g_2", 3.0)[0] == Approx(-0.2).margin(tol));
  CHECK(destination("g_sqrt", 3.0)[0] == Approx(-0.2).margin(tol));
  CHECK(destination("g_b", 3.0, {0.3, -0.1}) == std::vector<double>{0.3, -0.1});
  // Previous loss -1.0 clamps to l = 0: the functions of l give 0, g_b adds the full xi.
  CHECK(destination("g_lga", -1.0)[0] == Approx(0.0).margin(tol));
  CHECK(destination("g_2", -1.0)[0] == Approx(0.0).margin(tol));
  CHECK(destination("g_sqrt", -1.0)[0] == Approx(0.0).margin(tol));
  const std::vector<double> gb0 = destination("g_b", -1.0, {0.3, -0.1});
  CHECK(gb0[0] == Approx(0.4).margin(tol));
  CHECK(gb0[1] == Approx(0.0).margin(tol));
  // The constants ignore the loss.
  CHECK(destination("const_half_gamma", 3.0)[0] == Approx(-0.1).margin(tol));
  CHECK(destination("const_gamma", -1.0)[0] == Approx(-0.2).margin(tol));

  // A miner name is not a pseudo-hardness; g_b needs the miner hardness.
  CHECK_THROWS_AS(destination("semihard", 0.1), engine::Error);
  CHECK_THROWS_AS(destination("g_b", 0.1), engine::Error);
}

TEST_CASE(
    "hm option names parse into their types, unknown ones are rejected by name; "
    "validate_hm rejects gamma <= 0",
    "[defenses]") {
  CHECK_NOTHROW(attacks::defenses::validate_hm(HmOptions()));
  CHECK(HmOptions().destination == attacks::defenses::HmDestination::GLga);  // the default
  for (const char* ok :
       {"random", "semihard", "softhard", "distance", "hardest", "r", "m", "s", "d", "h"}) {
    HmOptions o;
    attacks::defenses::set_hm_destination(o, ok);
    INFO(ok);
    CHECK(o.destination == attacks::defenses::HmDestination::Miner);
    CHECK(o.destination_miner == losses::parse_miner(ok));
    CHECK(attacks::defenses::hm_destination_name(o) == losses::miner_name(o.destination_miner));
    CHECK_NOTHROW(attacks::defenses::validate_hm(o));
  }
  for (const char* pseudo :
       {"g_b", "g_lga", "g_2", "g_sqrt", "const_0", "const_half_gamma", "const_gamma"}) {
    HmOptions o;
    o.destination_miner = Miner::Hardest;
    attacks::defenses::set_hm_destination(o, pseudo);
    INFO(pseudo);
    CHECK(o.destination != attacks::defenses::HmDestination::Miner);
    CHECK(o.destination_miner == Miner::Hardest);  // g_b's miner is left as it was
    CHECK(attacks::defenses::hm_destination_name(o) == pseudo);
  }
  CHECK(attacks::defenses::parse_hm_objective("et") == attacks::defenses::HmObjective::Et);
  CHECK(attacks::defenses::parse_hm_objective("l2") == attacks::defenses::HmObjective::L2);
  HmOptions o;
  SECTION("destination") {
    CHECK_THROWS_WITH(attacks::defenses::set_hm_destination(o, "g_3"),
                      Contains("hm.destination") && Contains("g_3"));
  }
  SECTION("objective") {
    CHECK_THROWS_WITH(attacks::defenses::parse_hm_objective("l1"),
                      Contains("hm.objective") && Contains("l1"));
  }
  SECTION("gamma = 0") {
    o.gamma = 0.0;
    CHECK_THROWS_WITH(attacks::defenses::validate_hm(o), Contains("hm.gamma"));
  }
  SECTION("gamma < 0") {
    o.gamma = -0.2;
    CHECK_THROWS_WITH(attacks::defenses::validate_hm(o), Contains("hm.gamma"));
  }
  SECTION("negative ics_lambda") {
    o.ics_lambda = -0.5;
    CHECK_THROWS_WITH(attacks::defenses::validate_hm(o), Contains("hm.ics_lambda"));
  }
}

TEST_CASE(
    "HM with destination = source miner: no attack, the loss on the source triplets mined "
    "with the loss margin",
    "[defenses]") {
  // Source and destination semihard. HM mines with the loss margin (0.2 for N), unlike REST, ACT
  // and Madry (1.0): the premise below shows the two bands pick differently on this batch.
  engine::Generator data(21);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  Harness h(11, 1, Metric::N, Miner::Semihard, 31);
  Harness twin(11, 1, Metric::N, Miner::Semihard, 31);
  Harness twin_other(11, 1, Metric::N, Miner::Semihard, 31);
  const Tensor clean = hm_clean(twin, batch.images, Metric::N);
  engine::Generator g1 = h.mining, g2 = h.mining;
  const losses::Triplets t =
      losses::mine_triplets(clean, batch.labels, Miner::Semihard, Metric::N, g1, 0.2);
  const losses::Triplets t_other =
      losses::mine_triplets(clean, batch.labels, Miner::Semihard, Metric::N, g2, 1.0);
  REQUIRE(t.negative.to_indices() != t_other.negative.to_indices());
  const double expected = one_forward_triplet_loss(twin, batch.images, t, Metric::N);
  REQUIRE(std::fabs(expected -
                    one_forward_triplet_loss(twin_other, batch.images, t_other, Metric::N)) > 1e-6);

  const auto hm = attacks::defenses::make_defense(hm_options("semihard", "m", 0.3, 0.05, 10));
  const StepResult r = hm->step(h.context, batch.images, batch.labels);
  CHECK(r.passes == 1);
  CHECK(r.loss.item() == expected);
  CHECK(defense_test::log_value(r, "adversarial_loss") == expected);
  CHECK_FALSE(defense_test::has_log(r, "attack_objective"));
  CHECK_FALSE(defense_test::has_log(r, "destination_hardness"));
  // Only the source was mined: no destination mining, no random-start draw.
  CHECK(h.mining.offset == g1.offset);
  CHECK(h.model->is_training());
}

TEST_CASE(
    "HM's ET objective stops after 2 steps when every triplet is already harder than the "
    "destination",
    "[defenses]") {
  // Source hardest (its triplets do not depend on the stream), destination const_gamma = -0.2.
  // On this batch every hardest triplet has H_S > -0.2 (checked), so the ET objective
  // mean min(0, H_S - H_D)^2 is 0 with a zero gradient: sign(0) = 0 leaves the images as they
  // are; step 0 compares 0 with the initial -1 (|0 - (-1)| >= 1e-7: go on), step 1 compares 0
  // with 0 (< 1e-7: stop). passes = 2 steps + 1 = 3, and the loss is that of the clean images.
  engine::Generator data(121);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  Harness h(24, 1, Metric::N, Miner::Hardest, 131);
  Harness twin(24, 1, Metric::N, Miner::Hardest, 131);
  const Tensor clean = hm_clean(twin, batch.images, Metric::N);
  engine::Generator copy = h.mining;
  const losses::Triplets t =
      losses::mine_triplets(clean, batch.labels, Miner::Hardest, Metric::N, copy, 0.2);
  const std::vector<double> hardness = host_hardness(clean, t, Metric::N);
  for (double x : hardness) REQUIRE(x > -0.2 + 1e-3);
  const double expected = one_forward_triplet_loss(twin, batch.images, t, Metric::N);

  DefenseOptions o = hm_options("hardest", "const_gamma", 0.3, 0.05, 10);
  const auto hm = attacks::defenses::make_defense(o);
  const StepResult r = hm->step(h.context, batch.images, batch.labels);
  CHECK(r.passes == 3);
  CHECK(defense_test::log_value(r, "attack_objective") == 0.0);
  CHECK(defense_test::log_value(r, "destination_hardness") == Approx(-0.2).margin(1e-15));
  CHECK(r.loss.item() == expected);

  // Without the early stop (tolerance 0) the same attack runs all 10 steps.
  o.hm.stop_tolerance = 0.0;
  Harness h2(24, 1, Metric::N, Miner::Hardest, 131);
  const StepResult r2 =
      attacks::defenses::make_defense(o)->step(h2.context, batch.images, batch.labels);
  CHECK(r2.passes == 11);
  CHECK(r2.loss.item() == expected);  // still nothing moved
}

TEST_CASE(
    "HM's gradual adversary: the first step starts from initial_loss, later steps from the "
    "previous adversarial loss",
    "[defenses]") {
  engine::Generator data(141);
  const defense_test::Spc2Batch first = defense_test::make_spc2_batch(6, 3, data);
  const defense_test::Spc2Batch second = defense_test::make_spc2_batch(6, 3, data);
  Harness h(25, 0, Metric::N, Miner::Semihard, 151);
  const auto hm = attacks::defenses::make_defense(hm_options("random", "g_lga", 0.1, 0.02, 3));
  CHECK(hm->state().empty());  // nothing before the first step

  // Step 1: l_{-1} = 2.0 -> l = clamp(2.0, 0, 0.2) / 0.2 = 1 -> g_lga = -0.2.
  const StepResult r1 = hm->step(h.context, first.images, first.labels);
  CHECK(defense_test::log_value(r1, "destination_hardness") == Approx(-0.2).margin(1e-15));
  const double l1 = defense_test::log_value(r1, "adversarial_loss");
  const std::map<std::string, Tensor> state = hm->state();
  REQUIRE(state.size() == 1);
  REQUIRE(state.count("hm_previous_loss") == 1);
  CHECK(state.at("hm_previous_loss").numel() == 1);
  CHECK(state.at("hm_previous_loss").item() == l1);
  CHECK(r1.loss.item() == l1);  // no ICS: the loss is the adversarial loss
  // This batch's loss is below gamma, so step 2's destination is not -0.2 again.
  REQUIRE(l1 > 0.0);
  REQUIRE(l1 < 0.2);

  // Step 2: g_lga = -gamma * clamp(l1, 0, gamma) / gamma = -l1.
  const StepResult r2 = hm->step(h.context, second.images, second.labels);
  CHECK(defense_test::log_value(r2, "destination_hardness") == Approx(-l1).epsilon(1e-14));
  CHECK(hm->state().at("hm_previous_loss").item() ==
        defense_test::log_value(r2, "adversarial_loss"));

  SECTION("a configured initial_loss is the first step's l_{-1}") {
    DefenseOptions o = hm_options("random", "g_lga", 0.1, 0.02, 3);
    o.hm.initial_loss = 0.05;  // l = 0.25 -> -0.05
    Harness h3(25, 0, Metric::N, Miner::Semihard, 151);
    const StepResult r3 =
        attacks::defenses::make_defense(o)->step(h3.context, first.images, first.labels);
    CHECK(defense_test::log_value(r3, "destination_hardness") == Approx(-0.05).margin(1e-15));
  }
}

TEST_CASE("HM's state round-trips through load_state and rejects unknown keys", "[defenses]") {
  engine::Generator data(161);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(4, 2, data);
  Harness h(26, 0, Metric::N, Miner::Semihard, 171);
  const auto hm = attacks::defenses::make_defense(hm_options("random", "g_lga", 0.1, 0.02, 2));
  hm->step(h.context, batch.images, batch.labels);
  const std::map<std::string, Tensor> saved = hm->state();

  const auto restored =
      attacks::defenses::make_defense(hm_options("random", "g_lga", 0.1, 0.02, 2));
  restored->load_state(saved);
  REQUIRE(restored->state().count("hm_previous_loss") == 1);
  CHECK(restored->state().at("hm_previous_loss").to_vector() ==
        saved.at("hm_previous_loss").to_vector());

  // A loaded value is the next step's l_{-1}: 0.05 -> l = 0.25 -> g_lga = -0.05.
  const auto loaded = attacks::defenses::make_defense(hm_options("random", "g_lga", 0.1, 0.02, 2));
  loaded->load_state({{"hm_previous_loss", f64({0.05})}});
  Harness h2(26, 0, Metric::N, Miner::Semihard, 171);
  const StepResult r = loaded->step(h2.context, batch.images, batch.labels);
  CHECK(defense_test::log_value(r, "destination_hardness") == Approx(-0.05).margin(1e-15));

  const auto fresh = attacks::defenses::make_defense(hm_options("random", "g_lga", 0.1, 0.02, 2));
  CHECK_THROWS_WITH(fresh->load_state({{"bogus", f64({0.05})}}), Contains("bogus"));
  CHECK_THROWS_WITH(fresh->load_state({{"hm_previous_loss", f64({0.05, 0.1})}}),
                    Contains("hm_previous_loss"));
}

TEST_CASE("HM with a miner destination aims at that miner's clean hardness (loss distance)",
          "[defenses]") {
  // Source semihard then destination hardest, both mined from the stream in that order on the
  // clean normalized embeddings; H_D = d(a, p) - d(a, n) of the hardest triplets with the loss's
  // distance ||. + 1e-6||, recomputed here on the host. The log is its mean.
  engine::Generator data(181);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  Harness h(27, 0, Metric::N, Miner::Semihard, 191);
  Harness twin(27, 0, Metric::N, Miner::Semihard, 191);
  const Tensor clean = hm_clean(twin, batch.images, Metric::N);
  engine::Generator copy = h.mining;
  losses::mine_triplets(clean, batch.labels, Miner::Semihard, Metric::N, copy, 0.2);
  const losses::Triplets d =
      losses::mine_triplets(clean, batch.labels, Miner::Hardest, Metric::N, copy, 0.2);
  const double expected = mean(host_hardness(clean, d, Metric::N));

  const StepResult r =
      attacks::defenses::make_defense(hm_options("semihard", "hardest", 0.1, 0.02, 2))
          ->step(h.context, batch.images, batch.labels);
  // 1e-14: host vs engine summation order over 4-element rows and 6 triplets.
  CHECK(defense_test::log_value(r, "destination_hardness") == Approx(expected).margin(1e-14));

  SECTION("g_b adds xi (1 - l) to its destination miner's hardness") {
    // initial_loss 0.1 -> l = 0.5 -> H_D = H_hardest + 0.1 * 0.5.
    DefenseOptions o = hm_options("semihard", "g_b", 0.1, 0.02, 2);
    o.hm.destination_miner = Miner::Hardest;
    o.hm.initial_loss = 0.1;
    Harness h2(27, 0, Metric::N, Miner::Semihard, 191);
    const StepResult r2 =
        attacks::defenses::make_defense(o)->step(h2.context, batch.images, batch.labels);
    CHECK(defense_test::log_value(r2, "destination_hardness") ==
          Approx(expected + 0.05).margin(1e-14));
  }
}

TEST_CASE("HM's ICS term: the loss with ICS minus the loss without is the logged ics_loss >= 0",
          "[defenses]") {
  // Identical models and streams: ICS adds a clean forward after the attack and draws nothing,
  // so both runs attack the same triplets identically.
  // Positives are copies of their anchors and the source is semihard (positive = partner):
  // d(a, p) = 2e-6, so any move of an adversarial anchor makes the ICS hinge positive; the L2
  // objective moves every triplet that is not exactly at its destination.
  engine::Generator data(201);
  const defense_test::Spc2Batch batch =
      defense_test::with_identical_pairs(defense_test::make_spc2_batch(6, 3, data));
  DefenseOptions off = hm_options("semihard", "g_lga", 0.3, 0.05, 5);
  off.hm.objective = attacks::defenses::HmObjective::L2;
  DefenseOptions on = off;
  on.hm.ics = true;
  DefenseOptions on_quarter = on;
  on_quarter.hm.ics_lambda = 0.25;
  Harness h_off(28, 0, Metric::N, Miner::Semihard, 211);
  Harness h_on(28, 0, Metric::N, Miner::Semihard, 211);
  Harness h_quarter(28, 0, Metric::N, Miner::Semihard, 211);
  const StepResult r_off =
      attacks::defenses::make_defense(off)->step(h_off.context, batch.images, batch.labels);
  const auto hm_on = attacks::defenses::make_defense(on);
  const StepResult r_on = hm_on->step(h_on.context, batch.images, batch.labels);
  const StepResult r_quarter = attacks::defenses::make_defense(on_quarter)
                                   ->step(h_quarter.context, batch.images, batch.labels);
  CHECK_FALSE(defense_test::has_log(r_off, "ics_loss"));
  CHECK(defense_test::log_value(r_on, "adversarial_loss") ==
        defense_test::log_value(r_off, "adversarial_loss"));
  const double ics = defense_test::log_value(r_on, "ics_loss");
  CHECK(ics >= 0.0);
  REQUIRE(ics > 1e-4);  // a real term (see above)
  // (a + b) - a recovers b up to one rounding of the sum: ulp(~1) ~ 2e-16.
  CHECK(std::fabs((r_on.loss.item() - r_off.loss.item()) - ics) <= 1e-15);
  // lambda scales the term linearly: 0.25 gives half of 0.5's (one rounding).
  CHECK(defense_test::log_value(r_quarter, "ics_loss") == Approx(ics / 2.0).epsilon(1e-14));
  // The next step's l_{t-1} is the adversarial loss alone, without the ICS term (hm.h step 5).
  CHECK(hm_on->state().at("hm_previous_loss").item() ==
        defense_test::log_value(r_on, "adversarial_loss"));
}

TEST_CASE(
    "HM's adversary moves the source hardness toward the destination: attack_objective "
    "below its clean value",
    "[defenses]") {
  // Destination const_0: H_D = 0. The ET objective at the clean images is
  // mean_i min(0, H_S_i)^2 with H_S from the same source triplets (mined first, from the
  // stream), recomputed on the host; the L2 objective is mean_i H_S_i^2. Positives are copies of
  // their anchors, so H_S = 2e-6 - d(a, n) < 0: every triplet is easier than its destination, and
  // both objectives start well above 0 (checked). Sign steps of 0.02 then make the triplets
  // harder (a far destination: no overshoot in 5 steps).
  engine::Generator data(221);
  const defense_test::Spc2Batch batch =
      defense_test::with_identical_pairs(defense_test::make_spc2_batch(6, 3, data));
  for (const char* objective : {"et", "l2"}) {
    INFO("objective " << objective);
    Harness h(29, 0, Metric::N, Miner::Semihard, 231);
    Harness twin(29, 0, Metric::N, Miner::Semihard, 231);
    const Tensor clean = hm_clean(twin, batch.images, Metric::N);
    engine::Generator copy = h.mining;
    const losses::Triplets s =
        losses::mine_triplets(clean, batch.labels, Miner::Random, Metric::N, copy, 0.2);
    double clean_value = 0.0;
    for (double x : host_hardness(clean, s, Metric::N)) {
      const double gap = x;  // H_S - H_D, H_D = 0
      clean_value += std::string(objective) == "et" ? std::pow(std::min(0.0, gap), 2) : gap * gap;
    }
    clean_value /= static_cast<double>(s.size());
    REQUIRE(clean_value > 1e-2);

    auto objective_after = [&](int64_t steps) {
      DefenseOptions o = hm_options("random", "const_0", 0.2, 0.02, steps);
      o.hm.objective = attacks::defenses::parse_hm_objective(objective);
      o.hm.stop_tolerance = 0.0;  // all steps
      Harness fresh(29, 0, Metric::N, Miner::Semihard, 231);
      return defense_test::log_value(
          attacks::defenses::make_defense(o)->step(fresh.context, batch.images, batch.labels),
          "attack_objective");
    };
    // One step logs the objective at the clean images (before the step): the formula itself.
    // 1e-12: host vs engine arithmetic on O(1) values.
    CHECK(objective_after(1) == Approx(clean_value).margin(1e-12));
    CHECK(objective_after(5) < clean_value * 0.9);
  }
}

TEST_CASE("HM's step is its header's math written out: two gradual steps with ICS", "[defenses]") {
  // hm.h steps 1-6 re-derived on a twin (same weights, same stream) from public pieces, for
  // HM[semihard, g_lga] with the ET objective, the early stop at 1e-7 and ICS, on a BN model:
  // the source triplets mined on the normalized clean eval-mode embeddings with the loss margin,
  // H_D = hm_destination_hardness of the previous loss (2.0 at first), PGD in eval mode on the
  // stacked [A; P; N] descending mean relu(H_D - H~_S)^2, one train-mode forward of the 3B
  // adversarial images, the triplet loss, plus lambda * ICS from one train-mode forward of the
  // clean [A; P]. The adversarial loss is the next step's previous loss. Positives are near-copies
  // of their anchors (fixture.h, offset 0.01: a and p differ), so the attack moves triplets and
  // the ICS term is not 0.
  engine::Generator data(261);
  const defense_test::Spc2Batch first =
      defense_test::with_identical_pairs(defense_test::make_spc2_batch(6, 3, data), 0.01);
  const defense_test::Spc2Batch second =
      defense_test::with_identical_pairs(defense_test::make_spc2_batch(6, 3, data), 0.01);
  DefenseOptions o = hm_options("semihard", "g_lga", 0.15, 0.03, 6);
  o.hm.ics = true;
  Harness h(32, 1, Metric::N, Miner::Semihard, 271);
  Harness twin(32, 1, Metric::N, Miner::Semihard, 271);
  models::Model& m = *twin.model;
  const auto hm = attacks::defenses::make_defense(o);
  Tensor previous = f64({2.0});
  std::vector<double> destinations, ics_values;
  for (const defense_test::Spc2Batch& batch : {first, second}) {
    const Tensor clean =
        losses::embed_for_metric(attacks::defenses::clean_embeddings(m, batch.images), Metric::N);
    const losses::Triplets s =
        losses::mine_triplets(clean, batch.labels, Miner::Semihard, Metric::N, twin.mining, 0.2);
    const int64_t b = s.size();
    const Tensor destination = attacks::defenses::hm_destination_hardness(o.hm, previous, Tensor());
    attacks::PgdOptions pgd = o.pgd;
    pgd.stop_tolerance = 1e-7;
    attacks::PgdTrace trace;
    m.eval();
    const Tensor adversarial = attacks::pgd_attack(
        engine::index_select(batch.images, engine::concat({s.anchor, s.positive, s.negative}, 0)),
        [&](const Tensor& x, int64_t) {
          const Tensor e = m.forward(x);
          const Tensor gap = losses::triplet_hardness(e.slice(0, 0, b), e.slice(0, b, 2 * b),
                                                      e.slice(0, 2 * b, 3 * b), Metric::N) -
                             destination;
          return engine::mean(engine::pow(engine::relu(-gap), 2.0));
        },
        pgd, &trace);
    m.train();
    const Tensor ap =
        m.forward(engine::index_select(batch.images, engine::concat({s.anchor, s.positive}, 0)));
    const Tensor e = m.forward(adversarial);
    const Tensor adversarial_loss = losses::triplet_loss_rows(
        e.slice(0, 0, b), e.slice(0, b, 2 * b), e.slice(0, 2 * b, 3 * b), Metric::N, 0.2);
    const Tensor ics = losses::ics_loss(ap.slice(0, 0, b), e.slice(0, 0, b), ap.slice(0, b, 2 * b),
                                        Metric::N, 0.5);
    previous = adversarial_loss.detach().reshape({1});
    destinations.push_back(destination.item());
    ics_values.push_back(ics.item());

    const StepResult r = hm->step(h.context, batch.images, batch.labels);
    // The same operations in the same order on the same values: bit-identical.
    CHECK(r.passes == trace.steps + 1);
    CHECK(defense_test::log_value(r, "destination_hardness") == destination.item());
    CHECK(defense_test::log_value(r, "adversarial_loss") == adversarial_loss.item());
    CHECK(defense_test::log_value(r, "ics_loss") == ics.item());
    CHECK(r.loss.item() == (adversarial_loss + ics).item());
    CHECK(hm->state().at("hm_previous_loss").item() == previous.item());
    CHECK(h.mining.offset == twin.mining.offset);
    CHECK(engine::nn::batch_norm_layers(*h.model)[0]->running_mean().to_vector() ==
          engine::nn::batch_norm_layers(m)[0]->running_mean().to_vector());
  }
  // Premises: the second step's destination came from the first step's loss (not -gamma again),
  // and ICS contributed.
  CHECK(destinations[0] == Approx(-0.2).margin(1e-15));
  CHECK(destinations[1] > -0.2 + 1e-3);
  CHECK(ics_values[0] > 1e-4);
  CHECK(ics_values[1] > 1e-4);
}

TEST_CASE("hm.loss_upper: u of l = clamp(loss, 0, u) / u (HM supplement Table 7); 0 means gamma",
          "[defenses]") {
  // gamma = 0.2. u = 2.2 (Table 7's unclipped run): previous loss 1.1 -> l = 0.5, g_lga = -0.1,
  // g_2 = -0.05; previous loss 3.0 clamps to l = 1 -> g_lga = -0.2. With u = 0 (= gamma) the
  // loss 1.1 clamps to l = 1 -> -0.2, as before.
  const double tol = 1e-15;
  auto lga = [](double upper, const char* name, double loss) {
    HmOptions o;
    o.loss_upper = upper;
    attacks::defenses::set_hm_destination(o, name);
    return attacks::defenses::hm_destination_hardness(o, f64({loss}), Tensor()).to_vector()[0];
  };
  CHECK(lga(2.2, "g_lga", 1.1) == Approx(-0.1).margin(tol));
  CHECK(lga(2.2, "g_2", 1.1) == Approx(-0.05).margin(tol));
  CHECK(lga(2.2, "g_lga", 3.0) == Approx(-0.2).margin(tol));
  CHECK(lga(0.0, "g_lga", 1.1) == Approx(-0.2).margin(tol));
  CHECK(lga(0.0, "g_lga", 0.1) == Approx(-0.1).margin(tol));
  HmOptions o;
  CHECK(o.loss_upper == 0.0);  // the paper's u = gamma stays the default
  CHECK(o.ics_margin == 0.0);  // HM §3.3's margin-0 ICS stays the default
  o.loss_upper = -1.0;
  CHECK_THROWS_WITH(attacks::defenses::validate_hm(o), Contains("hm.loss_upper"));
  o.loss_upper = 0.0;
  o.ics_margin = -0.2;
  CHECK_THROWS_WITH(attacks::defenses::validate_hm(o), Contains("hm.ics_margin"));
}
