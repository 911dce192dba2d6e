// EST (attacks/defenses/est.cpp): with eps = 0 it trains on exactly the configured loss of the
// clean images (train mode) and logs the clean loss of the eval-mode embeddings; a step with a
// budget equals est.cpp's math written out with public pieces on a twin, bit for bit; the logged
// clean loss leaves the mining stream alone. The step contract and the ES adversary's direction,
// which every recipe (every ES recipe) shares, are in contract_test.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "attacks/defenses/common.h"
#include "attacks/defenses/defense.h"
#include "attacks/pgd.h"
#include "tests/defenses/fixture.h"

namespace {

using defense_test::Harness;
using engine::Tensor;
using losses::Metric;
using losses::Miner;

}  // namespace

TEST_CASE("EST with eps = 0 trains on the configured loss of the clean train-mode embeddings",
          "[defenses]") {
  // The configured loss mines with the hardest miner: its triplets depend on the embeddings only
  // (checked below), so the expected value does not depend on how far the ES adversary advanced
  // the mining stream before EST calls the loss. A BN model (one branch) makes the train-mode
  // (batch statistics) and eval-mode (running statistics) embeddings differ, so the test sees
  // which one EST trains on and which one it logs as clean_loss.
  engine::Generator data(41);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(5, 3, data);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    Harness h(13, 1, metric, Miner::Hardest, 51);
    Harness twin(13, 1, metric, Miner::Hardest, 51);
    engine::Generator any_a(1), any_b(999);
    twin.model->eval();
    const Tensor eval_embeddings = twin.model->forward(batch.images);
    twin.model->train();
    const Tensor train_embeddings = twin.model->forward(batch.images);
    const double expected =
        losses::spc2_triplet_loss(train_embeddings, batch.labels, Miner::Hardest, metric, any_a)
            .item();
    REQUIRE(expected ==
            losses::spc2_triplet_loss(train_embeddings, batch.labels, Miner::Hardest, metric, any_b)
                .item());
    const double eval_loss =
        losses::spc2_triplet_loss(eval_embeddings, batch.labels, Miner::Hardest, metric, any_a)
            .item();
    REQUIRE(std::fabs(expected - eval_loss) > 1e-6);

    const auto est =
        attacks::defenses::make_defense(defense_test::defense_options("est", 0.0, 0.01, 3));
    const attacks::defenses::StepResult r = est->step(h.context, batch.images, batch.labels);
    // Bit-identical: eps = 0 leaves every pixel exactly as it was (x0 + clip(., -0, 0)), and the
    // same forward and loss run on the same images.
    CHECK(r.loss.item() == expected);
    CHECK(defense_test::log_value(r, "adversarial_loss") == expected);
    CHECK(defense_test::log_value(r, "clean_loss") == eval_loss);
  }
}

TEST_CASE("EST's clean_loss log does not change the mining stream training sees", "[defenses]") {
  // A semihard loss depends on the stream. EST logs the clean loss with a copy of the stream, so
  // the loss it trains on must equal the configured loss at the stream position the test's spy
  // records when EST calls it for training (the second call; the first is the logged one).
  engine::Generator data(42);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  std::vector<engine::Generator> seen;
  const defense_test::LossFn spy = [&seen](const Tensor& e, const Tensor& labels,
                                           engine::Generator& gen) {
    seen.push_back(gen);
    return losses::spc2_triplet_loss(e, labels, Miner::Semihard, Metric::N, gen);
  };
  Harness h(14, 0, Metric::N, Miner::Semihard, 52, spy);
  const engine::Generator before = h.mining;
  const auto est =
      attacks::defenses::make_defense(defense_test::defense_options("est", 0.0, 0.01, 2));
  const attacks::defenses::StepResult r = est->step(h.context, batch.images, batch.labels);
  REQUIRE(seen.size() == 2);
  // The logged call sees the untouched stream, on a copy: EST's own stream moves on from there.
  CHECK(seen[0].offset == before.offset);
  // The training call sees the stream where the ES adversary alone leaves it (its first-step
  // offset draw), not advanced further by the logged clean loss's mining.
  engine::Generator adversary_only = before;
  attacks::defenses::embedding_shift_adversary(
      *h.model, batch.images, attacks::defenses::clean_embeddings(*h.model, batch.images),
      Metric::N, {0.0, 0.01, 2, false, 0, 0.0}, adversary_only, nullptr);
  CHECK(adversary_only.offset > before.offset);
  CHECK(seen[1].offset == adversary_only.offset);
  engine::Generator at_training = seen[1];
  const double expected = losses::spc2_triplet_loss(h.model->forward(batch.images), batch.labels,
                                                    Miner::Semihard, Metric::N, at_training)
                              .item();
  CHECK(r.loss.item() == expected);
  // ... and the trainer's stream ends where the training loss left it.
  CHECK(h.mining.offset == at_training.offset);
}

TEST_CASE(
    "EST's step is its header's math written out: ES adversary on every image, the "
    "configured loss on f(x~)",
    "[defenses]") {
  // est.cpp steps 1-3 re-derived on a twin (same weights, same stream) from public pieces: the
  // clean eval-mode embeddings as the reference, the ES adversary (common.h) on the whole batch
  // drawing from the stream, the configured (semihard) loss on the train-mode f(x~) mining from
  // the stream where the adversary left it; the logged clean loss uses a copy of the stream.
  defense_test::TwinSetup s(45, 17, 55);
  const defense_test::Spc2Batch& batch = s.batch;
  Harness& twin = s.twin;
  const Tensor clean = attacks::defenses::clean_embeddings(*twin.model, batch.images);
  engine::Generator copy = twin.mining;
  const double clean_loss = twin.context.loss(clean, batch.labels, copy).item();
  const Tensor adversarial = attacks::defenses::embedding_shift_adversary(
      *twin.model, batch.images, clean, Metric::N, s.pgd, twin.mining, nullptr);
  const double expected =
      twin.context.loss(twin.model->forward(adversarial), batch.labels, twin.mining).item();

  const attacks::defenses::StepResult r = s.step(s.options("est"));
  // The same operations in the same order on the same values: bit-identical.
  s.check_matches_twin(r, expected);
  CHECK(defense_test::log_value(r, "clean_loss") == clean_loss);
}
