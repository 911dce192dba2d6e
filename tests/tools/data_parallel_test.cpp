// tools/dml/data_parallel.h in one process (a world of one): the rows of each micro-batch, its
// range of the mining stream, the mean of the micro-batches' gradients and values, and the
// configs that cannot be cut into micro-batches. Every expected value is worked out by hand.
// Two MPI ranks against one process with two micro-batches: tests/dist/mpi_train.sh.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/common/check.h"
#include "tools/dml/args.h"
#include "tools/dml/config.h"
#include "tools/dml/data_parallel.h"

namespace {

using Catch::Matchers::Contains;
using nlohmann::json;

// The message of the UsageError that check_micro_batches throws for `config` ("" if none).
std::string refusal(const json& config) {
  const dml::TrainConfig resolved = dml::resolve_config(config, "t.json");
  try {
    dml::check_micro_batches(resolved);
  } catch (const dml::UsageError& e) {
    return e.what();
  }
  return "";
}

engine::Tensor vector_of(const std::vector<double>& values) {
  return engine::Tensor::from_vector(values, {static_cast<int64_t>(values.size())});
}

}  // namespace

TEST_CASE("micro-batches: contiguous whole pairs of the SPC-2 batch", "[tools]") {
  // 8 pairs = 16 images in 4 micro-batches: 2 pairs = 4 images each, in order.
  for (int64_t g = 0; g < 4; ++g) {
    const dml::RowRange rows = dml::micro_batch_rows(16, g, 4);
    CHECK(rows.begin == 4 * g);
    CHECK(rows.end == 4 * g + 4);
  }
  // An epoch's last batch of 5 pairs in 2 micro-batches: pairs 0-2 (rows 0-5), pairs 3-4 (6-9).
  CHECK(dml::micro_batch_rows(10, 0, 2).begin == 0);
  CHECK(dml::micro_batch_rows(10, 0, 2).end == 6);
  CHECK(dml::micro_batch_rows(10, 1, 2).begin == 6);
  CHECK(dml::micro_batch_rows(10, 1, 2).end == 10);
  CHECK_THROWS_WITH(dml::micro_batch_rows(2, 1, 2), Contains("sampler.drop_last"));
  CHECK_THROWS_WITH(dml::micro_batch_rows(9, 0, 2), Contains("not whole pairs"));
}

TEST_CASE("micro-batches: a rank decodes the rows of its own micro-batches only", "[tools]") {
  // 2 ranks of 1 micro-batch, a batch of 4 pairs = 8 rows: rank 0 rows 0-3, rank 1 rows 4-7.
  CHECK(dml::rank_rows(8, 0, 1, 2).begin == 0);
  CHECK(dml::rank_rows(8, 0, 1, 2).end == 4);
  CHECK(dml::rank_rows(8, 1, 1, 2).begin == 4);
  CHECK(dml::rank_rows(8, 1, 1, 2).end == 8);
  // 2 ranks of 2 micro-batches, 8 pairs = 16 rows: rank 1 runs micro-batches 2 and 3 of 4,
  // pairs 4-7, rows 8-15.
  CHECK(dml::rank_rows(16, 1, 2, 2).begin == 8);
  CHECK(dml::rank_rows(16, 1, 2, 2).end == 16);
  // The epoch's last batch of 5 pairs over 2 ranks: pairs 0-2 (rows 0-5) and 3-4 (rows 6-9).
  CHECK(dml::rank_rows(10, 0, 1, 2).end == 6);
  CHECK(dml::rank_rows(10, 1, 1, 2).begin == 6);
  CHECK(dml::rank_rows(10, 1, 1, 2).end == 10);
  // One process of 3 micro-batches decodes all rows.
  CHECK(dml::rank_rows(12, 0, 3, 1).begin == 0);
  CHECK(dml::rank_rows(12, 0, 3, 1).end == 12);
  CHECK_THROWS_WITH(dml::rank_rows(2, 1, 1, 2), Contains("sampler.drop_last"));
}

TEST_CASE("micro-batches: each draws from its own range of the mining stream", "[tools]") {
  engine::Generator mining(7);
  mining.offset = 10;
  CHECK(dml::micro_batch_generator(mining, 0).seed == 7);
  CHECK(dml::micro_batch_generator(mining, 0).offset == 10);
  CHECK(dml::micro_batch_generator(mining, 3).offset == 10 + 3 * (uint64_t{1} << 32));
  engine::Generator used = dml::micro_batch_generator(mining, 1);
  used.offset += uint64_t{1} << 32;  // its whole range
  CHECK_NOTHROW(dml::check_micro_batch_draws(used, mining, 1));
  used.offset += 1;
  CHECK_THROWS_WITH(dml::check_micro_batch_draws(used, mining, 1), Contains("more than its range"));
}

TEST_CASE("micro-batches: the gradient is the mean of the micro-batches' gradients", "[tools]") {
  engine::Tensor p = vector_of({0.0, 0.0}).set_requires_grad();
  engine::Tensor q = vector_of({0.0}).set_requires_grad();
  engine::Tensor r = vector_of({0.0}).set_requires_grad();
  dml::GradientAverager averager({p, q, r});
  p.set_grad(vector_of({1.0, 2.0}));  // micro-batch 0 reaches p and q
  q.set_grad(vector_of({4.0}));
  averager.add();
  CHECK_FALSE(p.grad().defined());    // moved into the sum
  p.set_grad(vector_of({3.0, 5.0}));  // micro-batch 1 reaches p only
  averager.add();
  averager.finish(2);
  CHECK(p.grad().to_vector() == std::vector<double>{2.0, 3.5});  // (1 + 3) / 2, (2 + 5) / 2
  CHECK(q.grad().to_vector() == std::vector<double>{2.0});       // (4 + 0) / 2
  CHECK_FALSE(r.grad().defined());  // reached by none: the optimizer skips it
}

TEST_CASE("micro-batches: logged values and passes are means over the micro-batches", "[tools]") {
  CHECK(dml::mean_over_micro_batches({3.0, 1.0}, 2) == std::vector<double>{1.5, 0.5});
  CHECK(dml::mean_count_over_micro_batches(9, 3) == 3);  // 3 passes in each of 3
  CHECK(dml::mean_count_over_micro_batches(5, 2) == 3);  // 2.5 rounds up
}

TEST_CASE("micro-batches: configs that cannot be cut are refused naming the key", "[tools]") {
  const json spc2_8 = {{"sampler", {{"pairs_per_batch", 8}}}};
  CHECK(refusal(spc2_8) == "");
  json cut = spc2_8;
  cut["train"] = {{"micro_batches", 2}};
  CHECK(refusal(cut) == "");
  cut["train"]["micro_batches"] = 3;
  CHECK_THAT(refusal(cut), Contains("config key 'sampler.pairs_per_batch' (8 pairs"));
  CHECK_THAT(refusal(cut), Contains("train.micro_batches 3 x 1 rank = 3 micro-batches"));

  cut["train"] = {{"micro_batches", 2}, {"mining_scope", "global"}};
  CHECK(refusal(cut) == "");  // triplet loss, no defense (global_mining_test.cpp: the refusals)
  cut["train"] = {{"micro_batches", 2}, {"batch_norm", "synchronized"}};
  CHECK_THAT(refusal(cut), Contains("config key 'train.batch_norm': 'synchronized'"));
  CHECK_THAT(refusal(cut), Contains("use train.micro_batches 1"));
  cut["train"] = {{"micro_batches", 1}, {"batch_norm", "synchronized"}};
  CHECK(refusal(cut) == "");  // one micro-batch per rank: the statistics are summed over ranks
  cut["train"] = {{"micro_batches", 1}, {"mining_scope", "global"}};
  CHECK(refusal(cut) == "");  // one micro-batch: global and local mining are the same

  json hm = spc2_8;
  hm["train"] = {{"micro_batches", 2}};
  hm["defense"] = {{"name", "hm"}};  // destination g_lga: reads the previous adversarial loss
  CHECK_THAT(refusal(hm), Contains("config key 'defense.hm.destination' (g_lga)"));
  hm["defense"]["hm"] = {{"destination", "semihard"}};
  CHECK(refusal(hm) == "");

  json m_per_class = {{"sampler", {{"name", "m_per_class"}}},
                      {"loss", {{"name", "arcface"}}},
                      {"train", {{"micro_batches", 2}}}};
  CHECK_THAT(refusal(m_per_class), Contains("config key 'sampler.name': m_per_class"));
}

TEST_CASE("gradient buckets: reverse parameter order, started during the last backward",
          "[tools]") {
  // Parameters d [1], a [2], b [1], c [1]; buckets of 2 floats in reverse order: {c, b}, {a},
  // {d}. Micro-batch 0: loss c b (a . x) + d with x = [1, 2]; micro-batch 1: c (b (a . x')) with
  // x' = [0, 1], which does not reach d. a = [3, 4], b = 5, c = 7: a . x = 11, a . x' = 4.
  // Gradients: dc = b (a . x) = 55 and 20, db = c (a . x) = 77 and 28, da = c b x = [35, 70] and
  // [0, 35], dd = 1 and none. Means over 2: dc 37.5, db 52.5, da [17.5, 52.5], dd 0.5.
  engine::Tensor d = vector_of({0.0}).set_requires_grad();
  engine::Tensor a = vector_of({3.0, 4.0}).set_requires_grad();
  engine::Tensor b = vector_of({5.0}).set_requires_grad();
  engine::Tensor c = vector_of({7.0}).set_requires_grad();
  dml::GradientAverager averager({d, a, b, c}, /*bucket_floats=*/2);
  REQUIRE(averager.bucket_members() == std::vector<std::vector<size_t>>{{3, 2}, {1}, {0}});
  const auto loss = [&](const std::vector<double>& x) {
    return engine::sum(c * (b * engine::sum(a * vector_of(x))));
  };
  averager.backward(loss({1.0, 2.0}) + engine::sum(d), /*last=*/false);
  CHECK(averager.events().empty());  // micro-batch 0 only sums
  averager.backward(loss({0.0, 1.0}), /*last=*/true);
  // The backward finishes c, then b (bucket 0 starts), then a (bucket 1 starts); d, not reached,
  // goes in with finish().
  CHECK(averager.events() == std::vector<std::string>{"ready 3", "ready 2", "start 0", "ready 1",
                                                      "start 1", "backward done"});
  averager.finish(2);
  CHECK(averager.events() == std::vector<std::string>{"ready 3", "ready 2", "start 0", "ready 1",
                                                      "start 1", "backward done", "ready 0",
                                                      "start 2", "wait 0", "wait 1", "wait 2"});
  CHECK(c.grad().to_vector() == std::vector<double>{37.5});
  CHECK(b.grad().to_vector() == std::vector<double>{52.5});
  CHECK(a.grad().to_vector() == std::vector<double>{17.5, 52.5});
  CHECK(d.grad().to_vector() == std::vector<double>{0.5});
}

TEST_CASE("global mining: refused where the loss mines nothing or the defense's attack mines",
          "[tools]") {
  json cut = {{"sampler", {{"pairs_per_batch", 8}}},
              {"train", {{"micro_batches", 2}, {"mining_scope", "global"}}}};
  CHECK(refusal(cut) == "");
  cut["loss"] = {{"name", "contrastive"}};
  CHECK(refusal(cut) == "");
  cut["loss"] = {{"name", "multi_similarity"}};
  CHECK_THAT(refusal(cut), Contains("config key 'train.mining_scope': 'global'"));
  CHECK_THAT(refusal(cut), Contains("loss 'multi_similarity'"));
  cut["loss"] = {{"name", "triplet"}};
  cut["defense"] = {{"name", "est"}};
  CHECK(refusal(cut) == "");  // its attack mines nothing: x~ made locally, the loss mined globally
  cut["defense"] = {{"name", "ses"}};
  CHECK(refusal(cut) == "");  // the same, its per-row shift made locally, averaged over the step
  cut["defense"] = {{"name", "rest"}};
  CHECK_THAT(refusal(cut), Contains("is not built for defense 'rest'"));
  CHECK_THAT(refusal(cut), Contains("the attack to see other ranks' images"));
  CHECK_THAT(refusal(cut), Contains("train.micro_batches 2 x 1 rank = 2 micro-batches"));
  for (const char* name : {"act", "madry", "hm", "mdprop"}) {
    cut["defense"] = {{"name", name}};
    if (std::string(name) == "mdprop") cut["model"] = {{"name", "c2f2-bn"}, {"bn_branches", 3}};
    CHECK_THAT(refusal(cut), Contains("is not built for defense '" + std::string(name) + "'"));
  }
}
