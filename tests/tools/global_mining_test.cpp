// tools/dml/global_mining.h in one process (a world of one, two micro-batches): the triplets that
// global mining picks and the gradient each micro-batch's rows receive, worked out by hand (the
// configs it refuses: data_parallel_test.cpp). Two MPI ranks against one process:
// tests/dist/mpi_train.sh with train.mining_scope global (tests/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "attacks/defenses/defense.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "losses/miners.h"
#include "tests/defenses/fixture.h"
#include "tools/dml/config.h"
#include "tools/dml/global_mining.h"
#include "tools/dml/training_loss.h"

namespace {

// Points on the x axis as 2-D rows [x, 0].
engine::Tensor rows_at(const std::vector<double>& xs) {
  std::vector<double> values;
  for (double x : xs) {
    values.push_back(x);
    values.push_back(0.0);
  }
  return engine::Tensor::from_vector(values, {static_cast<int64_t>(xs.size()), 2});
}

engine::Tensor labels_of(const std::vector<int64_t>& labels) {
  return engine::Tensor::from_indices(labels, {static_cast<int64_t>(labels.size())});
}

// The first components of the rows of a [B, D] tensor (the x of the points, or of a gradient).
std::vector<double> x_components(const engine::Tensor& rows) {
  const std::vector<double> all = rows.to_vector();
  std::vector<double> xs;
  for (size_t i = 0; i < all.size(); i += static_cast<size_t>(rows.size(1))) xs.push_back(all[i]);
  return xs;
}

// The triplet loss of the hand-worked cases: hardest negatives, Euclidean, margin 1.
dml::TrainConfig hardest_triplet_config() {
  dml::TrainConfig config;
  config.loss = dml::Loss::Triplet;
  config.metric = losses::Metric::E;
  config.margin = 1.0;
  config.miner = losses::Miner::Hardest;
  return config;
}

// Sets the harness's TinyEmbedder to map a 1x4x4 image to [16 p0, 0, 0, 0] (p0 its first pixel):
// every parameter 0 but fc.weight[0][0] = 16.
void map_first_pixel_to_x(defense_test::Harness& h) {
  for (const auto& [name, parameter] : h.model->named_parameters()) {
    engine::Tensor zero =
        engine::Tensor::zeros(parameter.shape(), parameter.dtype(), parameter.device());
    engine::Tensor target = parameter;
    target.copy_(zero);
    if (name == "fc.weight") {
      std::vector<double> w(64, 0.0);
      w[0] = 16.0;  // output 0 = 16 x pixel 0
      target.copy_(engine::Tensor::from_vector(w, {4, 16}, parameter.dtype()));
    }
  }
}

// 1x4x4 images whose first pixel is x / 16 (dyadic, so exact; the rest 0): map_first_pixel_to_x's
// model embeds them as [x, 0, 0, 0].
engine::Tensor images_at(const std::vector<double>& xs) {
  std::vector<double> pixels(xs.size() * 16, 0.0);
  for (size_t i = 0; i < xs.size(); ++i) pixels[i * 16] = xs[i] / 16.0;
  return engine::Tensor::from_vector(pixels, {static_cast<int64_t>(xs.size()), 1, 4, 4},
                                     engine::DType::F64);
}

}  // namespace

TEST_CASE("global mining: anchors mined against the whole step, gradient per micro-batch",
          "[tools]") {
  // Two micro-batches of two pairs, hardest negatives in Euclidean distance (margin 1):
  //   micro-batch 0: rows 0 (x=0) and 1 (0.5) of class 0, rows 2 (3) and 3 (3.5) of class 1;
  //   micro-batch 1: rows 4 (1) and 5 (6) of class 2, rows 6 (10) and 7 (2.5) of class 3.
  engine::Tensor e0 = rows_at({0.0, 0.5, 3.0, 3.5}).set_requires_grad();
  engine::Tensor e1 = rows_at({1.0, 6.0, 10.0, 2.5}).set_requires_grad();
  const engine::Tensor labels = labels_of({0, 0, 1, 1, 2, 2, 3, 3});
  const dml::TrainConfig config = hardest_triplet_config();

  const engine::Tensor step = dml::gather_step_embeddings({e0, e1});
  CHECK(x_components(step) == std::vector<double>{0.0, 0.5, 3.0, 3.5, 1.0, 6.0, 10.0, 2.5});
  CHECK_FALSE(step.requires_grad());
  engine::Generator gen(5);
  const losses::Triplets t =
      losses::mine_triplets(step, labels, config.miner, config.metric, gen, config.margin);
  // The nearest row of another class of each anchor (2i; the positive is its partner 2i + 1):
  // anchor 0 (x=0): row 4 (d=1), in the other micro-batch; anchor 2 (x=3): row 7 (d=0.5), also;
  // anchor 4 (x=1): row 1 (d=0.5); anchor 6 (x=10): row 5 (d=4).
  CHECK(t.anchor.to_indices() == std::vector<int64_t>{0, 2, 4, 6});
  CHECK(t.positive.to_indices() == std::vector<int64_t>{1, 3, 5, 7});
  CHECK(t.negative.to_indices() == std::vector<int64_t>{4, 7, 1, 5});
  // Mining micro-batch 0 alone (mining_scope local) picks row 2 for anchor 0 (d=3), row 1 for
  // anchor 2 (d=2.5).
  engine::Generator local_gen(5);
  const losses::Triplets local = losses::mine_triplets(
      e0.detach(), labels_of({0, 0, 1, 1}), config.miner, config.metric, local_gen, config.margin);
  CHECK(local.negative.to_indices() == std::vector<int64_t>{2, 1});

  // L = mean of d(a,p) - d(a,n) + 1 = ((0.5 - 1 + 1) + (0.5 - 0.5 + 1) + (5 - 0.5 + 1) +
  // (7.5 - 4 + 1)) / 4 = 11.5 / 4; each micro-batch back-propagates G x L = 2 L through its rows.
  // dL/dx per triplet: anchor sign(a-p) - sign(a-n), positive sign(p-a), negative sign(a-n),
  // over 4: row 0: 0; row 1: (+1 [p of t0] +1 [n of t2]) / 4 = 0.5; row 2: -2/4; row 3: 1/4;
  // row 4: (-1 [n of t0] - 2 [a of t2]) / 4 = -0.75; row 5: (+1 +1) / 4; rows 6, 7: 0.
  const std::vector<engine::Tensor> live = {e0, e1};
  for (int64_t g = 0; g < 2; ++g) {
    const engine::Tensor loss =
        dml::loss_on_triplets(config, dml::with_live_rows(step, live[g], 4 * g), t);
    CHECK(loss.item() == Approx(11.5 / 4).epsilon(1e-6));
    engine::backward(engine::mul_scalar(loss, 2.0));
  }
  // The micro-batches' mean (GradientAverager: the sum over G = 2, times 1/2) is dL/dE.
  const std::vector<double> expected0 = {0.0, 0.5, -0.5, 0.25};
  const std::vector<double> expected1 = {-0.75, 0.5, 0.0, 0.0};
  const std::vector<double> got0 = x_components(e0.grad()), got1 = x_components(e1.grad());
  for (size_t i = 0; i < 4; ++i) {
    CHECK(got0[i] / 2 == Approx(expected0[i]).margin(1e-5));
    CHECK(got1[i] / 2 == Approx(expected1[i]).margin(1e-5));
  }
}

TEST_CASE("global mining with EST: each micro-batch attacked alone, triplets across both",
          "[tools]") {
  // The same eight points as above, now as images (images_at) embedded as [x, 0, 0, 0]
  // (map_first_pixel_to_x). EST with eps = 0 leaves every pixel as it was, so each micro-batch's
  // adversarial embeddings are its points, and the step's triplets are those worked out above.
  defense_test::Harness h(7, 0, losses::Metric::E, losses::Miner::Hardest, 11);
  map_first_pixel_to_x(h);
  const std::vector<engine::Tensor> images = {images_at({0.0, 0.5, 3.0, 3.5}),
                                              images_at({1.0, 6.0, 10.0, 2.5})};
  const std::vector<engine::Tensor> labels = {labels_of({0, 0, 1, 1}), labels_of({2, 2, 3, 3})};
  const attacks::defenses::DefenseOptions est = defense_test::defense_options("est", 0.0, 0.01, 1);
  std::vector<engine::Tensor> live;
  std::vector<attacks::defenses::AttackedBatch> attacked;
  for (int64_t g = 0; g < 2; ++g) {  // each micro-batch's attack sees only its own four images
    attacked.push_back(attacks::defenses::est_attack(est.pgd, h.context, images[g], labels[g]));
    CHECK(attacked.back().adversarial.to_vector() == images[g].to_vector());
    CHECK(attacked.back().trace.steps == 1);
    live.push_back(h.model->forward(attacked.back().adversarial));
  }
  const engine::Tensor step = dml::gather_step_embeddings(live);
  CHECK(x_components(step) == std::vector<double>{0.0, 0.5, 3.0, 3.5, 1.0, 6.0, 10.0, 2.5});
  const dml::TrainConfig config = hardest_triplet_config();
  engine::Generator gen(5);
  const losses::Triplets t = losses::mine_triplets(step, labels_of({0, 0, 1, 1, 2, 2, 3, 3}),
                                                   config.miner, config.metric, gen, config.margin);
  // Anchors 0 and 2 (micro-batch 0) take their negatives 4 and 7 from micro-batch 1, anchor 4
  // (micro-batch 1) takes row 1 from micro-batch 0 (distances as above).
  CHECK(t.negative.to_indices() == std::vector<int64_t>{4, 7, 1, 5});
  for (int64_t g = 0; g < 2; ++g) {
    const engine::Tensor loss =
        dml::loss_on_triplets(config, dml::with_live_rows(step, live[g], 4 * g), t);
    CHECK(loss.item() == Approx(11.5 / 4).epsilon(1e-6));
    const attacks::defenses::StepResult result =
        attacks::defenses::adversarial_loss_result(loss, attacked[g].clean_loss, attacked[g].trace);
    CHECK(result.passes == 2);  // one PGD step + 1
    CHECK(defense_test::log_value(result, "adversarial_loss") == Approx(11.5 / 4).epsilon(1e-6));
  }
}

TEST_CASE("global mining with SES: each micro-batch attacked and shifted alone, the loss over both",
          "[tools]") {
  // The eight points of the EST case, SES with eps = 0 and ses_weight 2: x~ = x, so each row's
  // shift (metric E, robrank's quirk: ||n(f(x~)) - f(x) + 1e-6||, n the L2 normalization) is
  // that of [x, 0, 0, 0] from its unit row: |1 - x| up to the 1e-6 terms (x = 0: the zero row
  // normalizes to 0, shift 2e-6; x = 1: 2e-6). Rows 0-7: 0, 0.5, 2, 2.5 | 0, 5, 9, 1.5.
  defense_test::Harness h(7, 0, losses::Metric::E, losses::Miner::Hardest, 11);
  map_first_pixel_to_x(h);
  const std::vector<engine::Tensor> images = {images_at({0.0, 0.5, 3.0, 3.5}),
                                              images_at({1.0, 6.0, 10.0, 2.5})};
  attacks::defenses::DefenseOptions ses = defense_test::defense_options("ses", 0.0, 0.01, 1);
  ses.ses_weight = 2.0;
  const std::vector<std::vector<double>> expected_shifts = {{0.0, 0.5, 2.0, 2.5},
                                                            {0.0, 5.0, 9.0, 1.5}};
  std::vector<engine::Tensor> live, live_shifts;
  std::vector<attacks::defenses::AttackedBatch> attacked;
  for (int64_t g = 0; g < 2; ++g) {  // each micro-batch's attack and shifts see its rows alone
    attacked.push_back(attacks::defenses::ses_attack(ses.pgd, h.context, images[g]));
    CHECK(attacked.back().adversarial.to_vector() == images[g].to_vector());
    CHECK(attacked.back().trace.steps == 1);
    live.push_back(h.model->forward(images[g]));
    const engine::Tensor shift = attacks::defenses::ses_embedding_shift(
        h.model->forward(attacked.back().adversarial), live.back(), losses::Metric::E);
    const std::vector<double> got = shift.to_vector();
    REQUIRE(got.size() == 4);
    for (size_t i = 0; i < 4; ++i) CHECK(got[i] == Approx(expected_shifts[g][i]).margin(1e-5));
    live_shifts.push_back(shift.unsqueeze(1));
  }
  const engine::Tensor step = dml::gather_step_embeddings(live);
  const engine::Tensor step_shifts = dml::gather_step_embeddings(live_shifts);
  CHECK(step_shifts.shape() == engine::Shape{8, 1});
  const dml::TrainConfig config = hardest_triplet_config();
  engine::Generator gen(5);
  const losses::Triplets t = losses::mine_triplets(step, labels_of({0, 0, 1, 1, 2, 2, 3, 3}),
                                                   config.miner, config.metric, gen, config.margin);
  CHECK(t.negative.to_indices() == std::vector<int64_t>{4, 7, 1, 5});  // as in the EST case
  // The step's loss: the triplets' 11.5 / 4 on the clean rows plus 2 x the mean shift over all
  // eight rows, 20.5 / 8: 2.875 + 5.125 = 8, the same from either micro-batch.
  for (int64_t g = 0; g < 2; ++g) {
    const engine::Tensor clean_loss =
        dml::loss_on_triplets(config, dml::with_live_rows(step, live[g], 4 * g), t);
    const engine::Tensor mean_shift =
        engine::mean(dml::with_live_rows(step_shifts, live_shifts[g], 4 * g));
    const attacks::defenses::StepResult result = attacks::defenses::ses_loss_result(
        clean_loss, mean_shift, ses.ses_weight, attacked[g].trace);
    CHECK(result.loss.item() == Approx(8.0).epsilon(1e-6));
    CHECK(defense_test::log_value(result, "clean_loss") == Approx(11.5 / 4).epsilon(1e-6));
    CHECK(defense_test::log_value(result, "embedding_shift") == Approx(20.5 / 8).epsilon(1e-5));
    CHECK(result.passes == 2);  // one PGD step + 1
  }
}

TEST_CASE("global mining with SES: each row's shift gradient from its own micro-batch, 1/B of it",
          "[tools]") {
  // The points of the first case as clean embeddings, every adversarial embedding [-1, 0]; metric
  // E, ses_weight 2. Row i's shift ||[-1, 0] - [x_i, 0] + 1e-6|| is 1 + x_i (to 1e-6), its
  // derivative by x_i is +1: the step's loss is 11.5 / 4 + 2 x (8 + 26.5) / 8 = 11.5, and dL/dx_i
  // is the triplets' (first case) plus 2 x 1/8 = 0.25, B = 8 being the whole step's rows.
  engine::Tensor e0 = rows_at({0.0, 0.5, 3.0, 3.5}).set_requires_grad();
  engine::Tensor e1 = rows_at({1.0, 6.0, 10.0, 2.5}).set_requires_grad();
  const engine::Tensor adversarial = rows_at({-1.0, -1.0, -1.0, -1.0});
  const std::vector<engine::Tensor> live = {e0, e1};
  std::vector<engine::Tensor> live_shifts;
  for (const engine::Tensor& e : live) {
    live_shifts.push_back(
        attacks::defenses::ses_embedding_shift(adversarial, e, losses::Metric::E).unsqueeze(1));
  }
  const engine::Tensor step = dml::gather_step_embeddings(live);
  const engine::Tensor step_shifts = dml::gather_step_embeddings(live_shifts);
  const dml::TrainConfig config = hardest_triplet_config();
  engine::Generator gen(5);
  const losses::Triplets t = losses::mine_triplets(step, labels_of({0, 0, 1, 1, 2, 2, 3, 3}),
                                                   config.miner, config.metric, gen, config.margin);
  for (int64_t g = 0; g < 2; ++g) {
    const attacks::defenses::StepResult result = attacks::defenses::ses_loss_result(
        dml::loss_on_triplets(config, dml::with_live_rows(step, live[g], 4 * g), t),
        engine::mean(dml::with_live_rows(step_shifts, live_shifts[g], 4 * g)), 2.0,
        attacks::PgdTrace());
    CHECK(result.loss.item() == Approx(11.5).epsilon(1e-6));
    engine::backward(engine::mul_scalar(result.loss, 2.0));  // G x L, as the step does
  }
  // The mean over G = 2 (GradientAverager): the first case's dL/dE plus 0.25 on every row.
  const std::vector<double> expected0 = {0.25, 0.75, -0.25, 0.5};
  const std::vector<double> expected1 = {-0.5, 0.75, 0.25, 0.25};
  const std::vector<double> got0 = x_components(e0.grad()), got1 = x_components(e1.grad());
  for (size_t i = 0; i < 4; ++i) {
    CHECK(got0[i] / 2 == Approx(expected0[i]).margin(1e-5));
    CHECK(got1[i] / 2 == Approx(expected1[i]).margin(1e-5));
  }
}
