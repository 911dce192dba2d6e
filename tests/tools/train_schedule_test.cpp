// What `dml train` does besides the loss: the optimizer's parameter groups apply their own lr and
// weight decay (hand-computed first steps of SGD and Adam), and evaluations happen after every
// eval.every_epochs epochs and after the last, once each, also across a resume.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/random.h"
#include "models/registry.h"
#include "tests/io/io_test_util.h"
#include "tests/tools/tiny_training.h"
#include "tools/dml/training_loss.h"

using nlohmann::json;
using tiny_training::log_records;
using tiny_training::tiny_config;

namespace {

// A C2F2 (D = 8) whose every parameter gets the gradient 0.5 + 0.001 i at element i, then one step
// of an optimizer made from `o`; returns name -> (value before, value after) in double.
struct Moved {
  std::vector<double> before, after, grad;
};
std::map<std::string, Moved> one_step(const dml::OptimizerConfig& o) {
  models::ModelConfig model_config;
  model_config.embedding_dim = 8;
  engine::Generator gen(3);
  const std::shared_ptr<models::Model> model = models::build_model(model_config, gen);
  std::map<std::string, Moved> moved;
  for (const auto& [name, param] : model->named_parameters()) {
    std::vector<double> g(static_cast<size_t>(param.numel()));
    for (size_t i = 0; i < g.size(); ++i) g[i] = 0.5 + 0.001 * double(i % 100);
    engine::Tensor grad = engine::Tensor::from_vector(g, param.shape(), param.dtype());
    engine::Tensor p = param;
    p.set_grad(grad);
    moved[name] = Moved{param.to_vector(), {}, g};
  }
  dml::make_optimizer(o, *model)->step();
  for (const auto& [name, param] : model->named_parameters()) moved[name].after = param.to_vector();
  return moved;
}

// Every element of `m` moved as `rule(p, g)` says, to f32 accuracy (one check per tensor: fc1
// has 3.2 million elements).
template <typename Rule>
void require_moved(const Moved& m, Rule rule) {
  size_t worst = 0;
  double worst_error = 0.0;
  for (size_t i = 0; i < m.before.size(); ++i) {
    const double expected = rule(m.before[i], m.grad[i]);
    const double error = std::abs(m.after[i] - expected) / (1e-6 * std::abs(expected) + 1e-7);
    if (error > worst_error) {
      worst_error = error;
      worst = i;
    }
  }
  INFO("element " << worst << ": " << m.before[worst] << " -> " << m.after[worst] << ", expected "
                  << rule(m.before[worst], m.grad[worst]));
  REQUIRE(worst_error <= 1.0);
}

}  // namespace

TEST_CASE("dml train optimizer: each group steps with its own lr and weight decay (sgd, adam)",
          "[tools][train]") {
  dml::OptimizerConfig o;
  o.lr = 0.01;
  o.weight_decay = 0.1;
  o.groups = {dml::ParamGroupConfig{"fc2.", 0.5, 0.25}, dml::ParamGroupConfig{"conv1.", 0.0, 0.0}};

  SECTION("sgd: p - lr (g + wd p)") {
    o.name = "sgd";
    const auto moved = one_step(o);
    require_moved(moved.at("fc2.weight"),
                  [](double p, double g) { return p - 0.5 * (g + 0.25 * p); });
    require_moved(moved.at("fc2.bias"),
                  [](double p, double g) { return p - 0.5 * (g + 0.25 * p); });
    require_moved(moved.at("fc1.weight"),
                  [](double p, double g) { return p - 0.01 * (g + 0.1 * p); });
    require_moved(moved.at("conv1.weight"), [](double p, double) { return p; });  // lr 0
  }
  SECTION("adam, first step: p - lr d / (|d| + eps) with d = g + wd p (coupled decay)") {
    o.name = "adam";
    const auto moved = one_step(o);
    const auto adam = [](double lr, double wd) {
      return [lr, wd](double p, double g) {
        const double d = g + wd * p;  // m-hat = d, v-hat = d^2 after one bias-corrected step
        return p - lr * d / (std::abs(d) + 1e-8);
      };
    };
    require_moved(moved.at("fc2.weight"), adam(0.5, 0.25));
    require_moved(moved.at("fc1.bias"), adam(0.01, 0.1));
    require_moved(moved.at("conv1.bias"), [](double p, double) { return p; });
  }
}

TEST_CASE("dml train: eval.every_epochs evaluates after every n-th epoch and the last, once each",
          "[tools][train]") {
  test::TempDir out;
  // 3 epochs of 2 batches, every 2 epochs: evaluations after epochs 2 and 3 (the last), not 1.
  const json schedule = {{"epochs", 3}, {"eval", {{"every_epochs", 2}}}};
  const auto eval_epochs = [](const std::string& dir) {
    std::vector<int64_t> epochs;
    for (const json& record : log_records(dir, "eval")) epochs.push_back(record.at("epoch"));
    return epochs;
  };
  REQUIRE(dml::train(tiny_config("triplet", out.file("whole"), 2, schedule), dml::TrainOptions()) ==
          0);
  CHECK(eval_epochs(out.file("whole")) == std::vector<int64_t>{2, 3});

  // Stopped at the end of epoch 2 (step 4) and resumed: still one evaluation per epoch 2 and 3.
  dml::TrainOptions stop;
  stop.stop_after_batches = 4;
  const dml::TrainConfig split = tiny_config("triplet", out.file("split"), 2, schedule);
  REQUIRE(dml::train(split, stop) == 0);
  dml::TrainOptions resume;
  resume.resume = true;
  REQUIRE(dml::train(split, resume) == 0);
  CHECK(eval_epochs(out.file("split")) == std::vector<int64_t>{2, 3});
  CHECK(test::read_bytes(out.file("whole/metrics.json")) ==
        test::read_bytes(out.file("split/metrics.json")));
}
