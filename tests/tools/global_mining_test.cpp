// tools/dml/global_mining.h in one process (a world of one, two micro-batches): the triplets that
// global mining picks and the gradient each micro-batch's rows receive, worked out by hand (the
// configs it refuses: data_parallel_test.cpp). Two MPI ranks against one process:
// tests/dist/mpi_train.sh with train.mining_scope global (tests/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "losses/miners.h"
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

// The x components of a [B, 2] gradient.
std::vector<double> x_components(const engine::Tensor& grad) {
  const std::vector<double> all = grad.to_vector();
  std::vector<double> xs;
  for (size_t i = 0; i < all.size(); i += 2) xs.push_back(all[i]);
  return xs;
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
  dml::TrainConfig config;
  config.loss = dml::Loss::Triplet;
  config.metric = losses::Metric::E;
  config.margin = 1.0;
  config.miner = losses::Miner::Hardest;

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
