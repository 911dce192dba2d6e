// The pieces the recipes share (attacks/defenses/common.h): the embedding-shift (ES) adversary's
// budget, direction and reproducibility, the random-start seeding, robrank's semihard band for
// training-time adversaries, and the small helpers (clean embeddings, row gathering, the last
// objective of a trace).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "attacks/defenses/common.h"
#include "attacks/pgd.h"
#include "engine/ops.h"
#include "tests/defenses/fixture.h"

namespace {

using attacks::PgdOptions;
using attacks::PgdTrace;
using attacks::defenses::clean_embeddings;
using attacks::defenses::embedding_shift_adversary;
using defense_test::Harness;
using engine::Tensor;
using losses::Metric;

std::string metric_label(Metric m) { return losses::metric_name(m); }

}  // namespace

TEST_CASE("ES adversary keeps max|x~ - x| <= eps and pixels in [0, 1] for every metric",
          "[defenses]") {
  engine::Generator data(3);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(4, 2, data);
  const std::vector<double> x = batch.images.to_vector();
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    for (double eps : {0.01, 0.3, 1.0}) {
      for (int64_t steps : {1, 5}) {
        INFO("metric " << metric_label(metric) << " eps " << eps << " steps " << steps);
        Harness h(1, 0, metric, losses::Miner::Hardest, 5);
        const Tensor reference = clean_embeddings(*h.model, batch.images);
        PgdTrace trace;
        const Tensor adv =
            embedding_shift_adversary(*h.model, batch.images, reference, metric,
                                      {eps, 0.05, steps, false, 0, 0.0}, h.mining, &trace);
        REQUIRE(adv.shape() == batch.images.shape());
        const std::vector<double> a = adv.to_vector();
        double max_delta = 0.0, lo = 1.0, hi = 0.0;
        for (size_t i = 0; i < a.size(); ++i) {
          REQUIRE_FALSE(std::isnan(a[i]));
          max_delta = std::max(max_delta, std::fabs(a[i] - x[i]));
          lo = std::min(lo, a[i]);
          hi = std::max(hi, a[i]);
        }
        // eps + 1e-12: x0 + clip(x - x0) can round by an ulp of the pixel value.
        CHECK(max_delta <= eps + 1e-12);
        // The attack moved: the shift's gradient is never exactly zero on this linear model.
        CHECK(max_delta > 0.0);
        CHECK(lo >= 0.0);
        CHECK(hi <= 1.0);
        CHECK(trace.steps == steps);
        CHECK(h.model->is_training());  // the attack's eval mode is undone
      }
    }
  }
}

TEST_CASE("ES adversary: the embedding shift grows with more steps and with a larger eps",
          "[defenses]") {
  // Metric E on the linear model f(x) = W x + b, so the shift the adversary ascends,
  //   s_i(delta) = ||W delta_i + 1e-6||, is a convex function of delta_i. For convex s,
  //   s(x + step) >= s(x) + grad s(x) . step, and a sign step (possibly shortened by the eps-ball
  //   or the [0, 1] clamp, both of which only shorten it) has grad . step = alpha ||grad||_1 > 0
  // when nothing clips: each PGD step after the first strictly increases every row's shift.
  engine::Generator data(3);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(4, 2, data);
  Harness h(1, 0, Metric::E, losses::Miner::Hardest, 5);
  const Tensor reference = clean_embeddings(*h.model, batch.images);
  auto shift_after = [&](const PgdOptions& options, Tensor* adversarial) {
    engine::Generator gen = h.mining;  // the same stream (the 1e-7 first-step offset) every time
    const Tensor adv = embedding_shift_adversary(*h.model, batch.images, reference, Metric::E,
                                                 options, gen, nullptr);
    if (adversarial != nullptr) *adversarial = adv;
    // Measured by the test itself: ||f(x~_i) - f(x_i)||, no 1e-6 (it changes s by <= 2e-6,
    // far below the >= 1e-3 per-step increase of this model).
    return defense_test::row_euclidean(h.model->forward(adv).detach(), reference);
  };

  SECTION("5 steps shift every row further than 2 steps (the first 2 steps are shared)") {
    // alpha 0.01 x 5 steps = 0.05 < eps 0.3, and pixels start in [0.2, 0.8]: nothing clips, and
    // PGD with 5 steps passes through the 2-step result (same start, same generator state).
    const std::vector<double> two = shift_after({0.3, 0.01, 2, false, 0, 0.0}, nullptr);
    const std::vector<double> five = shift_after({0.3, 0.01, 5, false, 0, 0.0}, nullptr);
    for (size_t i = 0; i < two.size(); ++i) {
      INFO("row " << i);
      CHECK(two[i] > 0.0);
      CHECK(five[i] > two[i] + 1e-3);
    }
  }

  SECTION("FGSM: 3 times the eps gives exactly 3 times the shift") {
    // One step: delta = eps * sign(g) with g the gradient at x itself, which does not depend on
    // eps; no clamp for eps <= 0.2 (pixels in [0.2, 0.8]). f is linear, so the shift W delta
    // scales with eps exactly (up to rounding of the forward, ~1e-15 relative).
    Tensor small, large;
    const std::vector<double> s = shift_after({0.05, 0.01, 1, false, 0, 0.0}, &small);
    const std::vector<double> l = shift_after({0.15, 0.01, 1, false, 0, 0.0}, &large);
    const std::vector<double> x = batch.images.to_vector(), a = small.to_vector(),
                              b = large.to_vector();
    for (size_t i = 0; i < x.size(); ++i) {
      INFO("pixel " << i);
      // Every pixel moves by the full step (1e-12: the step x0 - eps - x0 rounds).
      CHECK(std::fabs(std::fabs(a[i] - x[i]) - 0.05) < 1e-12);
      CHECK(std::fabs(std::fabs(b[i] - x[i]) - 0.15) < 1e-12);
      CHECK((a[i] > x[i]) == (b[i] > x[i]));  // the same sign pattern
    }
    for (size_t i = 0; i < s.size(); ++i) {
      INFO("row " << i);
      CHECK(s[i] > 0.0);
      CHECK(l[i] / s[i] == Approx(3.0).epsilon(1e-9));
    }
  }
}

TEST_CASE("ES adversary is a function of the generator state, and draws from it", "[defenses]") {
  engine::Generator data(4);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(3, 3, data);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << metric_label(metric));
    Harness h(2, 0, metric, losses::Miner::Hardest, 8);
    const Tensor reference = clean_embeddings(*h.model, batch.images);
    const PgdOptions options{0.1, 0.02, 4, false, 0, 0.0};
    engine::Generator g1 = h.mining, g2 = h.mining;
    const Tensor a1 =
        embedding_shift_adversary(*h.model, batch.images, reference, metric, options, g1, nullptr);
    const Tensor a2 =
        embedding_shift_adversary(*h.model, batch.images, reference, metric, options, g2, nullptr);
    CHECK(a1.to_vector() == a2.to_vector());
    CHECK(g1.offset == g2.offset);
    // The first-step offset {-1, 0, 1} * 1e-7 is drawn from the stream (common.h).
    CHECK(g1.offset > h.mining.offset);
  }
}

TEST_CASE(
    "seeded: without a random start options and generator stay as they are, with one it draws "
    "one block for a fresh seed",
    "[defenses]") {
  const PgdOptions off{0.1, 0.01, 3, false, 42, 0.5};
  engine::Generator gen(17);
  gen.offset = 5;
  const PgdOptions same = attacks::seeded(off, gen);
  CHECK(same.eps == off.eps);
  CHECK(same.alpha == off.alpha);
  CHECK(same.steps == off.steps);
  CHECK_FALSE(same.random_start);
  CHECK(same.seed == 42);
  CHECK(same.stop_tolerance == off.stop_tolerance);
  CHECK(gen.seed == 17);
  CHECK(gen.offset == 5);

  PgdOptions on = off;
  on.random_start = true;
  engine::Generator copy = gen;
  const PgdOptions first = attacks::seeded(on, gen);
  CHECK(gen.offset == 6);  // exactly one Philox block
  CHECK(gen.seed == 17);
  CHECK(first.seed != 42);
  CHECK(first.random_start);
  CHECK(first.eps == on.eps);
  CHECK(first.alpha == on.alpha);
  CHECK(first.steps == on.steps);
  CHECK(first.stop_tolerance == on.stop_tolerance);
  // Reproducible from the generator state, and a new seed for the next block.
  CHECK(attacks::seeded(on, copy).seed == first.seed);
  CHECK(attacks::seeded(on, gen).seed != first.seed);
  CHECK(gen.offset == 7);
}

TEST_CASE("adversary_mining_margin is robrank's semihard band: 1.0 for N and E, 0.2 for C",
          "[defenses]") {
  CHECK(attacks::defenses::adversary_mining_margin(Metric::N) == 1.0);
  CHECK(attacks::defenses::adversary_mining_margin(Metric::E) == 1.0);
  CHECK(attacks::defenses::adversary_mining_margin(Metric::C) == 0.2);
}

TEST_CASE("clean_embeddings: eval-mode forward without gradient, previous mode restored",
          "[defenses]") {
  // With BN: eval mode uses the running statistics (initially mean 0, var 1), train mode the
  // batch's, so the two outputs differ and a train-mode forward would move the running mean.
  engine::Generator data(6);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(3, 3, data);
  Harness h(3, 1, Metric::N, losses::Miner::Hardest, 1);
  Harness twin(3, 1, Metric::N, losses::Miner::Hardest, 1);
  const std::vector<double> running_before =
      engine::nn::batch_norm_layers(*h.model)[0]->running_mean().to_vector();
  const Tensor clean = clean_embeddings(*h.model, batch.images);
  CHECK_FALSE(clean.requires_grad());
  CHECK(h.model->is_training());
  CHECK(engine::nn::batch_norm_layers(*h.model)[0]->running_mean().to_vector() == running_before);
  twin.model->eval();
  const Tensor expected = twin.model->forward(batch.images);
  CHECK(clean.to_vector() == expected.to_vector());
  twin.model->train();
  CHECK(defense_test::max_abs_difference(twin.model->forward(batch.images), clean) > 1e-3);
  // A model in eval mode stays in eval mode.
  h.model->eval();
  clean_embeddings(*h.model, batch.images);
  CHECK_FALSE(h.model->is_training());
}

TEST_CASE("gather_rows picks rows in index order, repeats allowed", "[defenses]") {
  const Tensor x =
      Tensor::from_vector({0, 1, 2, 3, 4, 5}, {3, 2}, engine::DType::F64, engine::Device::cpu());
  const Tensor rows = attacks::defenses::gather_rows(x, Tensor::from_indices({2, 0, 2}, {3}));
  CHECK(rows.shape() == engine::Shape{3, 2});
  CHECK(rows.to_vector() == std::vector<double>{4, 5, 0, 1, 4, 5});
}

TEST_CASE("log_attack: nothing without a step, else the last step's objective and max_delta",
          "[defenses]") {
  PgdTrace trace;
  std::vector<std::pair<std::string, Tensor>> logs;
  attacks::defenses::log_attack(logs, trace);
  CHECK(logs.empty());
  trace.objective = {Tensor::scalar(3.0, engine::DType::F64),
                     Tensor::scalar(-1.5, engine::DType::F64)};
  trace.max_delta = {Tensor::scalar(0.1, engine::DType::F64),
                     Tensor::scalar(0.25, engine::DType::F64)};
  attacks::defenses::log_attack(logs, trace, "_2");
  REQUIRE(logs.size() == 2);
  CHECK(logs[0].first == "attack_objective_2");
  CHECK(logs[0].second.item() == -1.5);
  CHECK(logs[1].first == "max_delta_2");
  CHECK(logs[1].second.item() == 0.25);
}

TEST_CASE("training adversaries log max_delta within eps; at eps = 0 clean_loss = adversarial_loss",
          "[defenses]") {
  engine::Generator data_gen(21);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data_gen);
  for (const char* name : {"est", "rest", "ses", "act", "madry", "hm"}) {
    INFO(name);
    Harness h(11, 0, Metric::N, losses::Miner::Random, 3);
    const attacks::defenses::StepResult r =
        attacks::defenses::make_defense(defense_test::defense_options(name, 0.2, 0.05, 3))
            ->step(h.context, batch.images, batch.labels);
    const double max_delta = defense_test::log_value(r, "max_delta");
    CHECK(max_delta > 0.0);
    CHECK(max_delta <= 0.2 + 1e-12);
  }
  // ACT, REST, Madry and HM log the loss of their triplets on the clean embeddings (robrank's
  // loss_orig). With no budget the adversarial triplets are the clean ones, and the model here
  // has no BN, so train and eval mode agree: the two losses are the same number.
  for (const char* name : {"rest", "act", "madry", "hm"}) {
    INFO(name);
    Harness h(11, 0, Metric::N, losses::Miner::Random, 3);
    const attacks::defenses::StepResult r =
        attacks::defenses::make_defense(defense_test::defense_options(name, 0.0, 0.05, 2))
            ->step(h.context, batch.images, batch.labels);
    CHECK(defense_test::log_value(r, "max_delta") == 0.0);
    const double clean = defense_test::log_value(r, "clean_loss");
    CHECK(clean > 0.0);
    CHECK(clean == Approx(defense_test::log_value(r, "adversarial_loss")).epsilon(1e-9));
  }
}
