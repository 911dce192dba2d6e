// Shared pieces of the defense tests (attacks/defenses/): a model plus the TrainingContext a
// recipe runs in, twin models for computing expected values independently (TwinSetup: the start
// and the bit-for-bit comparison of a step written out on a twin), the contract every recipe's
// step() must keep, and plain host-side (double) distances for hand-computed values.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attacks/defenses/common.h"
#include "attacks/defenses/defense.h"
#include "attacks/pgd.h"
#include "engine/autograd.h"
#include "engine/nn/batch_norm.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "losses/losses.h"
#include "tests/defenses/tiny_model.h"

namespace defense_test {

using attacks::defenses::DefenseOptions;
using attacks::defenses::StepResult;
using attacks::defenses::TrainingContext;
using engine::Tensor;

using LossFn = std::function<Tensor(const Tensor&, const Tensor&, engine::Generator&)>;

// The configured loss of most tests: robrank's p<miner>triplet<metric> (losses/triplet.h).
inline LossFn triplet_loss_fn(losses::Miner miner, losses::Metric metric) {
  return [miner, metric](const Tensor& e, const Tensor& labels, engine::Generator& gen) {
    return losses::spc2_triplet_loss(e, labels, miner, metric, gen);
  };
}

// A TinyEmbedder built from `model_seed` (two harnesses with the same seed hold identical
// weights) and the training context around it, with its own mining stream.
struct Harness {
  std::shared_ptr<TinyEmbedder> model;
  engine::Generator mining;
  TrainingContext context;

  Harness(uint64_t model_seed, int64_t bn_branches, losses::Metric metric, losses::Miner miner,
          uint64_t mining_seed, LossFn loss = {})
      : model(make_model(model_seed, bn_branches)),
        mining(mining_seed),
        context{*model,
                loss ? loss : triplet_loss_fn(miner, metric),
                metric,
                miner,
                losses::default_margin(metric),
                mining} {}
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  static std::shared_ptr<TinyEmbedder> make_model(uint64_t seed, int64_t bn_branches) {
    engine::Generator gen(seed);
    auto m = std::make_shared<TinyEmbedder>(gen, bn_branches);
    m->train();
    return m;
  }
};

inline DefenseOptions defense_options(const std::string& name, double eps, double alpha,
                                      int64_t steps) {
  DefenseOptions o;
  o.recipe = attacks::defenses::parse_recipe(name);
  o.pgd.eps = eps;
  o.pgd.alpha = alpha;
  o.pgd.steps = steps;
  return o;
}

// The batch with every positive image replaced by a copy of its anchor, moved by +-offset
// (alternating by pixel; pixels start in [0.2, 0.8]). With offset 0, d(a, p) is the loss distance
// of identical rows (1e-6 sqrt(D) for N): every triplet is easy (H < 0) and any move of the
// anchor away from its clean copy is farther than the positive; a small offset keeps that mostly
// true while a and p stay distinguishable.
inline Spc2Batch with_identical_pairs(const Spc2Batch& batch, double offset = 0.0) {
  std::vector<double> pixels = batch.images.to_vector();
  const int64_t n = batch.images.size(0);
  const int64_t per_image = batch.images.numel() / n;
  for (int64_t i = 0; i + 1 < n; i += 2) {
    for (int64_t k = 0; k < per_image; ++k) {
      pixels[(i + 1) * per_image + k] = pixels[i * per_image + k] + (k % 2 ? offset : -offset);
    }
  }
  return {Tensor::from_vector(pixels, batch.images.shape(), batch.images.dtype()), batch.labels};
}

// The value of log `key` of a step (FAIL when absent).
inline double log_value(const StepResult& result, const std::string& key) {
  for (const auto& [name, value] : result.logs) {
    if (name == key) {
      REQUIRE(value.defined());
      REQUIRE(value.numel() == 1);
      return value.item();
    }
  }
  FAIL("step result has no log '" << key << "'");
  return NAN;
}

inline bool has_log(const StepResult& result, const std::string& key) {
  for (const auto& entry : result.logs) {
    if (entry.first == key) return true;
  }
  return false;
}

// The "attack_objective" log of one step of recipe `name` (eps 0.2, alpha 0.02, `steps` steps)
// on a fresh harness: calls with the same seeds see the same model and stream.
inline double attack_objective_after(const std::string& name, int64_t steps, uint64_t model_seed,
                                     losses::Metric metric, losses::Miner miner,
                                     uint64_t mining_seed, const Spc2Batch& batch) {
  Harness h(model_seed, 0, metric, miner, mining_seed);
  return log_value(attacks::defenses::make_defense(defense_options(name, 0.2, 0.02, steps))
                       ->step(h.context, batch.images, batch.labels),
                   "attack_objective");
}

// The ES objective -mean_i d(f^(x_i), r_i + 1e-7 s_i) of EST, REST and SES at the clean images
// (what one PGD step logs, s_i in {-1, 0, 1}^D): for N and E each row distance is
// ||1e-6 * 1 - 1e-7 s_i|| in [0.9e-6 sqrt(D), 1.1e-6 sqrt(D)] = [1.8e-6, 2.2e-6] for D = 4; for C,
// 1 - cos(e, e + 1e-7 s) = O(1e-14).
inline void check_clean_es_objective(double value, losses::Metric metric) {
  if (metric == losses::Metric::C) {
    CHECK(std::fabs(value) < 1e-13);
  } else {
    CHECK(value >= -2.2e-6);
    CHECK(value <= -1.8e-6);
  }
}

// What defense.h promises of every step(): `passes` forward/backward passes, the model back in
// train mode, no parameter gradient left behind by the adversary (it must use engine::grad), and
// a one-element loss whose backward reaches every parameter with a finite gradient.
inline void check_step_contract(models::Model& model, const StepResult& result,
                                int64_t expected_passes) {
  CHECK(result.passes == expected_passes);
  CHECK(model.is_training());
  for (const auto& [name, p] : model.named_parameters()) {
    INFO("parameter " << name);
    CHECK_FALSE(p.grad().defined());
  }
  REQUIRE(result.loss.defined());
  REQUIRE(result.loss.numel() == 1);
  REQUIRE(result.loss.requires_grad());
  CHECK(std::isfinite(result.loss.item()));
  engine::backward(result.loss);
  for (const auto& [name, p] : model.named_parameters()) {
    INFO("parameter " << name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().shape() == p.shape());
    for (double g : p.grad().to_vector()) CHECK(std::isfinite(g));
  }
}

// The triplet loss of one train-mode forward of [A; P; N] (the rows of `t`) through a fresh twin
// of the recipe's model: what REST, Madry and HM train on when nothing is perturbed.
inline double one_forward_triplet_loss(Harness& twin, const Tensor& images,
                                       const losses::Triplets& t, losses::Metric metric) {
  const Tensor index = engine::concat({t.anchor, t.positive, t.negative}, 0);
  const Tensor e = twin.model->forward(engine::index_select(images, index));
  const int64_t b = t.size();
  return losses::triplet_loss_rows(e.slice(0, 0, b), e.slice(0, b, 2 * b), e.slice(0, 2 * b, 3 * b),
                                   metric, losses::default_margin(metric))
      .item();
}

// The start of a test that writes a recipe's step out with public pieces on a twin: a (6, 3) SPC-2
// batch, a PGD budget of 3 steps, the harness the recipe steps in and its twin (same weights,
// same stream; a BN model with one branch, the semihard miner).
struct TwinSetup {
  Spc2Batch batch;
  attacks::PgdOptions pgd = {0.15, 0.03, 3, false, 0, 0.0};
  Harness h;
  Harness twin;

  TwinSetup(uint64_t data_seed, uint64_t model_seed, uint64_t mining_seed,
            losses::Metric metric = losses::Metric::N)
      : batch(seeded_spc2_batch(data_seed)),
        h(model_seed, 1, metric, losses::Miner::Semihard, mining_seed),
        twin(model_seed, 1, metric, losses::Miner::Semihard, mining_seed) {}

  // Recipe `name` with this budget.
  DefenseOptions options(const std::string& name) const {
    return defense_options(name, pgd.eps, pgd.alpha, pgd.steps);
  }
  // Step 1 of ACT, REST and Madry written out on the twin for metric N: the clean eval-mode
  // embeddings of the batch (common.h clean_embeddings) and the triplets those recipes attack,
  // mined on them with the semihard miner and robrank's band 1.0 (common.h
  // adversary_mining_margin), from the twin's stream.
  struct MinedOnTwin {
    Tensor clean;
    losses::Triplets triplets;
  };
  MinedOnTwin mine_on_twin() {
    const Tensor clean = attacks::defenses::clean_embeddings(*twin.model, batch.images);
    return {clean, losses::mine_triplets(clean, batch.labels, losses::Miner::Semihard,
                                         losses::Metric::N, twin.mining, 1.0)};
  }
  // The adversary of ACT and Madry written out on the twin: PGD (attacks/pgd.h) with this budget,
  // in eval mode, from the batch's images at rows `rows` (I64 [R]), descending `objective`; the
  // twin is back in train mode after.
  Tensor pgd_on_twin(const Tensor& rows, const attacks::Objective& objective) {
    const Tensor images = engine::index_select(batch.images, rows);
    twin.model->eval();
    const Tensor adversarial = attacks::pgd_attack(images, objective, pgd);
    twin.model->train();
    return adversarial;
  }

  // One step of the recipe configured by `o` on h.
  StepResult step(const DefenseOptions& o) {
    return attacks::defenses::make_defense(o)->step(h.context, batch.images, batch.labels);
  }

  // What the step must share, bit for bit, with the recipe written out on the twin: the loss, the
  // stream position after the step, and the BN running statistics (which show how the images
  // were grouped into train-mode forwards).
  void check_matches_twin(const StepResult& result, double expected_loss) {
    CHECK(result.loss.item() == expected_loss);
    CHECK(h.mining.offset == twin.mining.offset);
    const std::vector<engine::nn::BatchNorm*> bn = engine::nn::batch_norm_layers(*h.model);
    const std::vector<engine::nn::BatchNorm*> twin_bn = engine::nn::batch_norm_layers(*twin.model);
    REQUIRE(bn.size() == twin_bn.size());
    for (size_t i = 0; i < bn.size(); ++i) {
      CHECK(bn[i]->running_mean().to_vector() == twin_bn[i]->running_mean().to_vector());
    }
  }

 private:
  static Spc2Batch seeded_spc2_batch(uint64_t seed) {
    engine::Generator gen(seed);
    return make_spc2_batch(6, 3, gen);
  }
};

// ---- host-side arithmetic for hand-computed expectations ----------------------------------

using Rows = std::vector<std::vector<double>>;

// x [N, D] as N host rows.
inline Rows host_rows(const Tensor& x) {
  REQUIRE(x.dim() == 2);
  const std::vector<double> v = x.to_vector();
  const int64_t n = x.size(0), d = x.size(1);
  Rows rows(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(d)));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) rows[i][j] = v[i * d + j];
  }
  return rows;
}

inline std::vector<double> unit(const std::vector<double>& a) {
  double s = 0.0;
  for (double x : a) s += x * x;
  std::vector<double> out(a);
  for (double& x : out) x /= std::sqrt(s);
  return out;
}

// ||a - b + 1e-6|| (PyTorch's pairwise_distance, what the losses use for N and E).
inline double offset_euclidean(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i] + 1e-6) * (a[i] - b[i] + 1e-6);
  return std::sqrt(s);
}

// The loss distance of losses/distance.h row_distance after embed_for_metric: N normalizes both
// rows, E compares raw rows, C is 1 - cos.
inline double metric_distance(losses::Metric metric, const std::vector<double>& a,
                              const std::vector<double>& b) {
  if (metric == losses::Metric::E) return offset_euclidean(a, b);
  const std::vector<double> ua = unit(a), ub = unit(b);
  if (metric == losses::Metric::N) return offset_euclidean(ua, ub);
  double dot = 0.0;
  for (size_t i = 0; i < a.size(); ++i) dot += ua[i] * ub[i];
  return 1.0 - dot;
}

// ||a_i - b_i|| per row of a, b [N, D] (no offset).
inline std::vector<double> row_euclidean(const Tensor& a, const Tensor& b) {
  const Rows ra = host_rows(a), rb = host_rows(b);
  std::vector<double> out;
  for (size_t i = 0; i < ra.size(); ++i) {
    double s = 0.0;
    for (size_t j = 0; j < ra[i].size(); ++j) s += (ra[i][j] - rb[i][j]) * (ra[i][j] - rb[i][j]);
    out.push_back(std::sqrt(s));
  }
  return out;
}

inline double max_abs_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  REQUIRE(va.size() == vb.size());
  double m = 0.0;
  for (size_t i = 0; i < va.size(); ++i) m = std::max(m, std::fabs(va[i] - vb[i]));
  return m;
}

}  // namespace defense_test
