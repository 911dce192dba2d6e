// SGD: PyTorch's update rule checked step by step on a hand-computed three-step case.
//
// Common setup: parameter p0 = (1, -2), gradients g1 = (0.5, -1), g2 = (0.25, 0.5),
// g3 = (-1, 2), lr = 0.1. The expected values below were worked out by hand from the formulas
//   d = g + wd p;  b = d (step 1) or momentum b + (1 - dampening) d;
//   d = d + momentum b (nesterov) or b;  p = p - lr d.
#include <catch2/catch.hpp>

#include <vector>

#include "engine/optim/sgd.h"
#include "kernels/optim/optim.h"
#include "tests/support/allclose.h"

using engine::DType;
using engine::Tensor;
using engine::optim::Sgd;
using engine::optim::SgdOptions;

namespace {

const std::vector<std::vector<double>> kGrads = {{0.5, -1.0}, {0.25, 0.5}, {-1.0, 2.0}};

// Runs three steps and returns the parameter after each.
std::vector<std::vector<double>> run_three_steps(const SgdOptions& options) {
  Tensor p = Tensor::from_vector({1.0, -2.0}, {2}, DType::F64);
  p.set_requires_grad(true);
  Sgd sgd({p}, options);
  std::vector<std::vector<double>> trajectory;
  for (const auto& g : kGrads) {
    p.set_grad(Tensor::from_vector(g, {2}, DType::F64));
    sgd.step();
    trajectory.push_back(p.to_vector());
  }
  return trajectory;
}

void require_trajectory(const std::vector<std::vector<double>>& actual,
                        const std::vector<std::vector<double>>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t s = 0; s < actual.size(); ++s) {
    test::require_close(actual[s], expected[s], 1e-12, 1e-12, "step " + std::to_string(s + 1));
  }
}

}  // namespace

TEST_CASE("sgd: plain, three steps", "[sgd]") {
  SgdOptions options;
  options.lr = 0.1;
  // p1 = (1, -2) - 0.1 (0.5, -1)        = (0.95, -1.9)
  // p2 = (0.95, -1.9) - 0.1 (0.25, 0.5) = (0.925, -1.95)
  // p3 = (0.925, -1.95) - 0.1 (-1, 2)   = (1.025, -2.15)
  require_trajectory(run_three_steps(options), {{0.95, -1.9}, {0.925, -1.95}, {1.025, -2.15}});
}

TEST_CASE("sgd: momentum 0.9, three steps", "[sgd]") {
  SgdOptions options;
  options.lr = 0.1;
  options.momentum = 0.9;
  // b1 = g1 = (0.5, -1);                            p1 = (1, -2) - 0.1 b1 = (0.95, -1.9)
  // b2 = 0.9 (0.5, -1) + (0.25, 0.5) = (0.7, -0.4);  p2 = (0.95 - 0.07, -1.9 + 0.04)
  //                                                     = (0.88, -1.86)
  // b3 = 0.9 (0.7, -0.4) + (-1, 2) = (-0.37, 1.64);  p3 = (0.88 + 0.037, -1.86 - 0.164)
  //                                                     = (0.917, -2.024)
  require_trajectory(run_three_steps(options), {{0.95, -1.9}, {0.88, -1.86}, {0.917, -2.024}});
}

TEST_CASE("sgd: momentum 0.9 with dampening 0.5, three steps", "[sgd]") {
  SgdOptions options;
  options.lr = 0.1;
  options.momentum = 0.9;
  options.dampening = 0.5;
  // Dampening does not apply on the first step: b1 = g1 = (0.5, -1); p1 = (0.95, -1.9)
  // b2 = 0.9 (0.5, -1) + 0.5 (0.25, 0.5) = (0.575, -0.65);    p2 = (0.8925, -1.835)
  // b3 = 0.9 (0.575, -0.65) + 0.5 (-1, 2) = (0.0175, 0.415);  p3 = (0.89075, -1.8765)
  require_trajectory(run_three_steps(options),
                     {{0.95, -1.9}, {0.8925, -1.835}, {0.89075, -1.8765}});
}

TEST_CASE("sgd: nesterov momentum 0.9, three steps", "[sgd]") {
  SgdOptions options;
  options.lr = 0.1;
  options.momentum = 0.9;
  options.nesterov = true;
  // b1 = (0.5, -1);     d1 = g1 + 0.9 b1 = (0.95, -1.9);     p1 = (0.905, -1.81)
  // b2 = (0.7, -0.4);   d2 = (0.25 + 0.63, 0.5 - 0.36) = (0.88, 0.14);  p2 = (0.817, -1.824)
  // b3 = (-0.37, 1.64); d3 = (-1 - 0.333, 2 + 1.476) = (-1.333, 3.476); p3 = (0.9503, -2.1716)
  require_trajectory(run_three_steps(options),
                     {{0.905, -1.81}, {0.817, -1.824}, {0.9503, -2.1716}});
}

TEST_CASE("sgd: weight decay 0.1, three steps", "[sgd]") {
  SgdOptions options;
  options.lr = 0.1;
  options.weight_decay = 0.1;
  // d1 = (0.5 + 0.1, -1 - 0.2) = (0.6, -1.2);             p1 = (0.94, -1.88)
  // d2 = (0.25 + 0.094, 0.5 - 0.188) = (0.344, 0.312);    p2 = (0.9056, -1.9112)
  // d3 = (-1 + 0.09056, 2 - 0.19112) = (-0.90944, 1.80888); p3 = (0.996544, -2.092088)
  require_trajectory(run_three_steps(options),
                     {{0.94, -1.88}, {0.9056, -1.9112}, {0.996544, -2.092088}});
}

TEST_CASE("sgd: nesterov with weight decay, three steps", "[sgd]") {
  SgdOptions options;
  options.lr = 0.1;
  options.momentum = 0.9;
  options.weight_decay = 0.1;
  options.nesterov = true;
  // d1 = (0.6, -1.2); b1 = d1; d1' = d1 + 0.9 b1 = (1.14, -2.28);  p1 = (0.886, -1.772)
  // d2 = (0.25 + 0.0886, 0.5 - 0.1772) = (0.3386, 0.3228)
  // b2 = 0.9 (0.6, -1.2) + d2 = (0.8786, -0.7572)
  // d2' = d2 + 0.9 b2 = (1.12934, -0.35868);                p2 = (0.773066, -1.736132)
  // d3 = (-1 + 0.0773066, 2 - 0.1736132) = (-0.9226934, 1.8263868)
  // b3 = 0.9 b2 + d3 = (-0.1319534, 1.1449068)
  // d3' = d3 + 0.9 b3 = (-1.04145146, 2.85680292);          p3 = (0.877211146, -2.021812292)
  require_trajectory(run_three_steps(options),
                     {{0.886, -1.772}, {0.773066, -1.736132}, {0.877211146, -2.021812292}});
}

TEST_CASE("sgd: the f32 kernel follows the same three steps", "[sgd][kernel]") {
  // Momentum case above, on raw float arrays.
  float p[2] = {1.0f, -2.0f};
  float b[2] = {0.0f, 0.0f};
  const float expected[3][2] = {{0.95f, -1.9f}, {0.88f, -1.86f}, {0.917f, -2.024f}};
  engine::kernels::SgdHyper hyper;
  hyper.lr = 0.1;
  hyper.momentum = 0.9;
  for (int s = 0; s < 3; ++s) {
    float g[2] = {float(kGrads[s][0]), float(kGrads[s][1])};
    hyper.first_step = (s == 0);
    engine::kernels::sgd_update_cpu<float>(2, g, hyper, p, b);
    REQUIRE(p[0] == Approx(expected[s][0]).epsilon(1e-6));
    REQUIRE(p[1] == Approx(expected[s][1]).epsilon(1e-6));
  }
}

TEST_CASE("sgd: invalid hyperparameters are rejected", "[sgd]") {
  Tensor p = Tensor::zeros({2}, DType::F64);
  p.set_requires_grad(true);
  SgdOptions options;
  options.nesterov = true;  // without momentum
  REQUIRE_THROWS_WITH(Sgd({p}, options), Catch::Contains("sgd") && Catch::Contains("nesterov"));
  options = SgdOptions();
  options.lr = -1.0;
  REQUIRE_THROWS_WITH(Sgd({p}, options), Catch::Contains("sgd") && Catch::Contains("learning"));
}
