// BatchNorm modules: per-branch state_dict names, routing, eval branch, frozen mode, counters.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/nn/batch_norm_sync.h"
#include "engine/nn/nn.h"
#include "engine/ops.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"

using engine::BatchNormRoute;
using engine::DType;
using engine::Tensor;
namespace nn = engine::nn;

TEST_CASE("BatchNorm2d: K=2 state_dict uses torchvision names and aux_bn.0.*", "[batch_norm]") {
  nn::BatchNorm2d bn(3, /*branches=*/2);
  CHECK(bn.weight().shape() == engine::Shape{2, 3});
  CHECK(bn.running_var().shape() == engine::Shape{2, 3});
  nn::StateDict state = bn.state_dict();
  CHECK(state.keys() == std::vector<std::string>{
                            "weight", "bias", "running_mean", "running_var", "num_batches_tracked",
                            "aux_bn.0.weight", "aux_bn.0.bias", "aux_bn.0.running_mean",
                            "aux_bn.0.running_var", "aux_bn.0.num_batches_tracked"});
  CHECK(state.at("weight").shape() == engine::Shape{3});
  CHECK(state.at("aux_bn.0.running_var").shape() == engine::Shape{3});
  CHECK(state.at("num_batches_tracked").shape() == engine::Shape{});
  CHECK(state.at("num_batches_tracked").dtype() == DType::I64);
  // Parameters stay [K, C] tensors for the optimizer.
  CHECK(bn.named_parameters().size() == 2);
  CHECK(nn::BatchNorm2d(4, 3).state_dict().contains("aux_bn.1.running_mean"));
}

TEST_CASE("BatchNorm2d: initial values, aux branches equal to branch 0", "[batch_norm]") {
  nn::BatchNorm2d bn(2, 2);
  nn::StateDict state = bn.state_dict();
  for (std::string prefix : {"", "aux_bn.0."}) {
    test::require_close(state.at(prefix + "weight"), {1, 1}, 0, 0, prefix + "weight");
    test::require_close(state.at(prefix + "bias"), {0, 0}, 0, 0, prefix + "bias");
    test::require_close(state.at(prefix + "running_mean"), {0, 0}, 0, 0, prefix + "mean");
    test::require_close(state.at(prefix + "running_var"), {1, 1}, 0, 0, prefix + "var");
    CHECK(state.at(prefix + "num_batches_tracked").item() == 0);
  }
}

TEST_CASE("BatchNorm2d: per-branch state loads into rows of the [K, C] tensors", "[batch_norm]") {
  nn::BatchNorm2d bn(2, 2);
  nn::StateDict state = bn.state_dict();
  state.set("aux_bn.0.running_mean", Tensor::from_vector({5, 6}, {2}));
  state.set("bias", Tensor::from_vector({-1, -2}, {2}));
  state.erase("num_batches_tracked");  // older checkpoints lack it: accepted
  state.erase("aux_bn.0.num_batches_tracked");
  bn.load_state_dict(state);
  test::require_close(bn.running_mean(), {0, 0, 5, 6}, 0, 0, "running_mean");
  test::require_close(bn.bias(), {-1, -2, 0, 0}, 0, 0, "bias");

  nn::StateDict missing_aux = bn.state_dict();
  missing_aux.erase("aux_bn.0.weight");
  REQUIRE_THROWS_WITH(bn.load_state_dict(missing_aux), Catch::Contains("'aux_bn.0.weight'"));
}

TEST_CASE("BatchNorm1d: training normalizes and updates branch 0's statistics", "[batch_norm]") {
  nn::BatchNorm1d bn(1);
  bn.to(DType::F64);
  Tensor x = Tensor::from_vector({1, 2, 3, 4}, {4, 1}, DType::F64);
  // mean 2.5, biased variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25, unbiased 5/3.
  Tensor y = bn(x);
  double s = std::sqrt(1.25 + 1e-5);
  test::require_close(y, {-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s}, 1e-12, 0, "y");
  // running = 0.9 running + 0.1 batch: mean 0.25, var 0.9 + 0.1 * 5/3 = 1.0666...
  test::require_close(bn.running_mean(), {0.25}, 1e-12, 0, "running_mean");
  test::require_close(bn.running_var(), {0.9 + 0.1 * 5.0 / 3.0}, 1e-12, 0, "running_var");
  CHECK(bn.num_batches_tracked().to_indices() == std::vector<int64_t>{1});
}

TEST_CASE("BatchNorm1d: routes send row ranges to their branches", "[batch_norm]") {
  nn::BatchNorm1d bn(1, 2);
  bn.to(DType::F64);
  bn.set_routes({BatchNormRoute{0, 2, 0}, BatchNormRoute{2, 4, 1}});
  Tensor x = Tensor::from_vector({1, 3, 10, 14}, {4, 1}, DType::F64);
  // Branch 0 sees {1, 3}: mean 2, biased var 1;  branch 1 sees {10, 14}: mean 12, biased var 4.
  Tensor y = bn(x);
  double s0 = std::sqrt(1 + 1e-5), s1 = std::sqrt(4 + 1e-5);
  test::require_close(y, {-1 / s0, 1 / s0, -2 / s1, 2 / s1}, 1e-12, 0, "y");
  // Running means 0.1 * 2 and 0.1 * 12; unbiased variances 2 and 8.
  test::require_close(bn.running_mean(), {0.2, 1.2}, 1e-12, 0, "running_mean");
  test::require_close(bn.running_var(), {0.9 + 0.2, 0.9 + 0.8}, 1e-12, 0, "running_var");
  CHECK(bn.num_batches_tracked().to_indices() == std::vector<int64_t>{1, 1});
  bn.set_routes({});
  bn(x);
  CHECK(bn.num_batches_tracked().to_indices() == std::vector<int64_t>{2, 1});
}

TEST_CASE("BatchNorm1d: eval uses the running statistics of the eval branch", "[batch_norm]") {
  nn::BatchNorm1d bn(1, 2);
  bn.to(DType::F64);
  nn::StateDict state = bn.state_dict();
  state.set("aux_bn.0.running_mean", Tensor::from_vector({1}, {1}));
  state.set("aux_bn.0.running_var", Tensor::from_vector({4}, {1}));
  state.set("aux_bn.0.bias", Tensor::from_vector({10}, {1}));
  bn.load_state_dict(state);
  bn.eval();
  Tensor x = Tensor::from_vector({3, 5}, {2, 1}, DType::F64);
  // Branch 0: mean 0, var 1 -> x / sqrt(1 + eps).
  test::require_close(bn(x), {3 / std::sqrt(1 + 1e-5), 5 / std::sqrt(1 + 1e-5)}, 1e-12, 0,
                      "branch 0");
  bn.set_eval_branch(1);
  // Branch 1: (x - 1) / sqrt(4 + eps) + 10.
  double s = std::sqrt(4 + 1e-5);
  test::require_close(bn(x), {2 / s + 10, 4 / s + 10}, 1e-12, 0, "branch 1");
  // Eval never updates statistics or counters.
  test::require_close(bn.running_mean(), {0, 1}, 0, 0, "running_mean");
  CHECK(bn.num_batches_tracked().to_indices() == std::vector<int64_t>{0, 0});
  REQUIRE_THROWS_WITH(bn.set_eval_branch(2), Catch::Contains("BatchNorm1d"));
}

TEST_CASE("BatchNorm1d: frozen uses running statistics while training", "[batch_norm]") {
  nn::BatchNorm1d bn(1);
  bn.to(DType::F64);
  bn.set_frozen(true);
  CHECK(bn.is_training());
  Tensor x = Tensor::from_vector({1, 2, 3, 4}, {4, 1}, DType::F64);
  x.set_requires_grad(true);
  Tensor y = bn(x);
  double s = std::sqrt(1 + 1e-5);
  test::require_close(y, {1 / s, 2 / s, 3 / s, 4 / s}, 1e-12, 0, "y");
  test::require_close(bn.running_mean(), {0.0}, 0, 0, "running_mean unchanged");
  CHECK(bn.num_batches_tracked().to_indices() == std::vector<int64_t>{0});
  // The affine parameters still learn: dL/dweight = sum(x_hat), dL/dbias = N.
  engine::backward(engine::sum(y));
  test::require_close(bn.weight().grad(), {10 / s}, 1e-12, 0, "weight grad");
  test::require_close(bn.bias().grad(), {4}, 1e-12, 0, "bias grad");
}

TEST_CASE("BatchNorm: model-wide routes, eval branch and freezing reach every layer",
          "[batch_norm]") {
  nn::Sequential model;
  model.push_back(std::make_shared<nn::Linear>(2, 3));
  auto bn1 = model.push_back(std::make_shared<nn::BatchNorm1d>(3, 2));
  auto inner = model.push_back(std::make_shared<nn::Sequential>());
  auto bn2 = inner->push_back(std::make_shared<nn::BatchNorm1d>(3, 2));
  CHECK(nn::batch_norm_layers(model).size() == 2);
  std::vector<BatchNormRoute> routes = {{0, 2, 0}, {2, 4, 1}};
  nn::set_batch_norm_routes(model, routes);
  CHECK(bn1->routes().size() == 2);
  CHECK(bn2->routes().size() == 2);
  model(Tensor::from_vector({1, 2, 3, 5, -1, 4, 0, 2}, {4, 2}));
  CHECK(bn2->num_batches_tracked().to_indices() == std::vector<int64_t>{1, 1});
  nn::set_batch_norm_eval_branch(model, 1);
  CHECK(bn2->eval_branch() == 1);
  nn::set_batch_norm_frozen(model, true);
  CHECK(bn1->frozen());
  CHECK(bn2->frozen());
}

TEST_CASE("BatchNorm2d: copy_main_to_aux duplicates branch 0", "[batch_norm]") {
  nn::BatchNorm2d bn(2, 3);
  nn::StateDict state = bn.state_dict();
  state.set("weight", Tensor::from_vector({2, 3}, {2}));
  state.set("running_var", Tensor::from_vector({7, 8}, {2}));
  bn.load_state_dict(state);
  bn.copy_main_to_aux();
  test::require_close(bn.weight(), {2, 3, 2, 3, 2, 3}, 0, 0, "weight");
  test::require_close(bn.running_var(), {7, 8, 7, 8, 7, 8}, 0, 0, "running_var");
}

TEST_CASE("BatchNorm: aux-branch noise moves branches 1..K-1's affine parameters only",
          "[batch_norm]") {
  nn::Sequential model;
  auto wide = model.push_back(std::make_shared<nn::BatchNorm1d>(4000, 3));
  auto single = model.push_back(std::make_shared<nn::BatchNorm1d>(5, 1));
  const std::vector<double> mean_before = wide->running_mean().to_vector();
  engine::Generator gen(17);
  nn::perturb_batch_norm_aux_branches(model, 0.1, gen);
  const std::vector<double> w = wide->weight().to_vector(), b = wide->bias().to_vector();
  for (int64_t c = 0; c < 4000; ++c) {  // branch 0 keeps the copy's values exactly
    REQUIRE(w[c] == 1.0);
    REQUIRE(b[c] == 0.0);
  }
  // Branches 1 and 2 get N(0, 0.01): sample mean ~ 0 and standard deviation ~ 0.1 over 8000
  // draws each (bounds ~6 standard errors wide), and the two branches differ from each other.
  for (const std::vector<double>* values : {&w, &b}) {
    const double origin = values == &w ? 1.0 : 0.0;
    double sum = 0.0, squares = 0.0;
    for (size_t i = 4000; i < 12000; ++i) {
      sum += (*values)[i] - origin;
      squares += ((*values)[i] - origin) * ((*values)[i] - origin);
    }
    const double mean = sum / 8000.0, sd = std::sqrt(squares / 8000.0 - mean * mean);
    CHECK(std::fabs(mean) < 0.007);
    CHECK(sd == Approx(0.1).margin(0.005));
    CHECK((*values)[4000] != (*values)[8000]);
  }
  CHECK(wide->running_mean().to_vector() == mean_before);  // statistics untouched
  test::require_close(single->weight(), std::vector<double>(5, 1.0), 0, 0, "one branch");
  // The same seed gives the same noise; stddev 0 changes nothing; a negative one is refused.
  nn::Sequential again;
  auto twin = again.push_back(std::make_shared<nn::BatchNorm1d>(4000, 3));
  again.push_back(std::make_shared<nn::BatchNorm1d>(5, 1));
  engine::Generator same(17);
  nn::perturb_batch_norm_aux_branches(again, 0.1, same);
  CHECK(twin->weight().to_vector() == w);
  nn::perturb_batch_norm_aux_branches(again, 0.0, same);
  CHECK(twin->weight().to_vector() == w);
  CHECK_THROWS(nn::perturb_batch_norm_aux_branches(again, -1.0, same));
}

TEST_CASE("BatchNorm2d grad: input, weight and bias through two routed branches",
          "[batch_norm][grad]") {
  nn::BatchNorm2d bn(2, 2);
  bn.to(DType::F64);
  {
    engine::NoGradGuard no_grad;
    engine::Generator gen(9);
    nn::init::uniform_(bn.weight(), 0.5, 1.5, gen);
    nn::init::uniform_(bn.bias(), -0.5, 0.5, gen);
  }
  bn.set_routes({BatchNormRoute{0, 2, 0}, BatchNormRoute{2, 3, 1}});
  Tensor x = test::random_leaf({3, 2, 2, 2}, 21);
  test::require_gradcheck([&](const std::vector<Tensor>&) { return bn(x); },
                          {x, bn.weight(), bn.bias()});
}

TEST_CASE("BatchNorm2d: errors name the module and the shapes", "[batch_norm]") {
  nn::BatchNorm2d bn(3);
  REQUIRE_THROWS_WITH(bn(Tensor::zeros({2, 4, 2, 2})),
                      Catch::Contains("BatchNorm2d") && Catch::Contains("[2, 4, 2, 2]"));
  REQUIRE_THROWS_WITH(bn(Tensor::zeros({2, 3})), Catch::Contains("BatchNorm2d"));
  REQUIRE_THROWS_WITH(nn::BatchNorm1d(3)(Tensor::zeros({2, 3, 2, 2})),
                      Catch::Contains("BatchNorm1d"));
  REQUIRE_THROWS_WITH(bn.set_routes({BatchNormRoute{0, 2, 1}}), Catch::Contains("branch 1"));
  REQUIRE_THROWS_WITH(nn::BatchNorm2d(0), Catch::Contains("BatchNorm2d"));
}

TEST_CASE("BatchNorm: synchronized statistics are the sums over the processes", "[batch_norm]") {
  // x = [1, 2, 3, 4], one channel: this process's sums are sum x = 10, sum x^2 = 30, n = 4.
  // The sum over the processes here doubles everything, as a second process with the same rows
  // would: n = 8, mean 20 / 8 = 2.5, biased var 60 / 8 - 6.25 = 1.25, the one process's values,
  // so y = (x - 2.5) / sqrt(1.25 + 1e-5) and dx are the plain batch norm's; only the running var
  // sees n = 8: 0.9 * 1 + 0.1 * 1.25 * 8 / 7.
  nn::BatchNorm1d synced(1);
  nn::BatchNorm1d plain(1);
  std::vector<std::vector<double>> sums;
  const auto double_it = [&](std::vector<double>& values) {
    sums.push_back(values);
    for (double& v : values) v *= 2.0;
  };
  const Tensor dy = Tensor::from_vector({1, -2, 0.5, 3}, {4, 1});
  Tensor x = Tensor::from_vector({1, 2, 3, 4}, {4, 1}).set_requires_grad();
  {
    nn::BatchNormSync sync(double_it);
    const Tensor y = synced(x);
    const double s = 1.0 / std::sqrt(1.25 + 1e-5);
    test::require_close(y, {-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s}, 1e-6, 1e-6, "y");
    engine::backward(engine::sum(y * dy));
    synced.eval();
    synced(x);  // running statistics: nothing summed
  }
  REQUIRE(sums.size() == 2);
  CHECK(sums[0] == std::vector<double>{10, 30, 4});  // [K = 1, 2, C = 1] sums, then the count
  CHECK(sums[1].size() == 2);  // the backward sums d/d(sum x) and d/d(sum x^2)
  test::require_close(synced.running_mean(), {0.25}, 1e-7, 0, "running mean");
  test::require_close(synced.running_var(), {0.9 + 0.125 * 8.0 / 7.0}, 1e-6, 0, "running var");
  Tensor plain_x = Tensor::from_vector({1, 2, 3, 4}, {4, 1}).set_requires_grad();
  engine::backward(engine::sum(plain(plain_x) * dy));
  test::require_close(x.grad(), plain_x.grad().to_vector(), 1e-5, 0, "dx");
  test::require_close(synced.weight().grad(), plain.weight().grad().to_vector(), 1e-5, 0, "dw");
}

TEST_CASE("BatchNorm: synchronized in one process is the plain batch norm, branch by branch",
          "[batch_norm]") {
  // Two branches over [6, 2, 2, 2]: rows 0-3 -> branch 1, rows 4-5 -> branch 0. Tolerance: the
  // synchronized side's var is sum x^2 / n - mean^2 in f32, the kernel's a two-pass sum; values
  // in [-1, 1] with a standard deviation near 0.6 leave both a few f32 ulps apart (~1e-6 in y).
  std::vector<double> values;
  for (int i = 0; i < 48; ++i) values.push_back(std::sin(1.7 * i + 0.3));
  const std::vector<BatchNormRoute> routes = {{0, 4, 1}, {4, 6, 0}};
  const Tensor dy =
      Tensor::from_vector(std::vector<double>(values.rbegin(), values.rend()), {6, 2, 2, 2});
  std::vector<std::vector<double>> results;
  for (bool synchronized : {false, true}) {
    nn::BatchNorm2d bn(2, /*branches=*/2);
    bn.set_routes(routes);
    Tensor x = Tensor::from_vector(values, {6, 2, 2, 2}).set_requires_grad();
    Tensor y;
    if (synchronized) {
      nn::BatchNormSync sync([](std::vector<double>&) {});  // a world of one
      y = bn(x);
      engine::backward(engine::sum(y * dy));
    } else {
      y = bn(x);
      engine::backward(engine::sum(y * dy));
    }
    std::vector<double> all = y.to_vector();
    for (const Tensor& t :
         {x.grad(), bn.weight().grad(), bn.bias().grad(), bn.running_mean(), bn.running_var()}) {
      for (double v : t.to_vector()) all.push_back(v);
    }
    CHECK(bn.num_batches_tracked().to_vector() == std::vector<double>{1, 1});
    results.push_back(all);
  }
  test::require_close(results[1], results[0], 2e-5, 0, "synchronized vs plain");
}
