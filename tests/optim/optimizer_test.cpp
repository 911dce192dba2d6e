// What every optimizer shares: parameter groups, skipping parameters without gradients,
// zero_grad, state export/import and parameter validation.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "engine/ops.h"
#include "engine/optim/adam.h"
#include "engine/optim/sgd.h"
#include "tests/support/allclose.h"

using engine::DType;
using engine::Tensor;
using engine::optim::Adam;
using engine::optim::AdamGroup;
using engine::optim::AdamOptions;
using engine::optim::Sgd;
using engine::optim::SgdGroup;
using engine::optim::SgdOptions;

namespace {

Tensor leaf(const std::vector<double>& values) {
  Tensor t = Tensor::from_vector(values, {int64_t(values.size())}, DType::F64);
  t.set_requires_grad(true);
  return t;
}

void set_grad(Tensor& t, const std::vector<double>& values) {
  t.set_grad(Tensor::from_vector(values, t.shape(), DType::F64));
}

}  // namespace

TEST_CASE("optimizer: parameter groups use their own learning rates", "[optimizer][sgd]") {
  Tensor a = leaf({1.0, 2.0});
  Tensor b = leaf({3.0});
  SgdOptions fast, slow;
  fast.lr = 0.5;
  slow.lr = 0.01;
  Sgd sgd({SgdGroup{{a}, fast}, SgdGroup{{b}, slow}});
  REQUIRE(sgd.group_count() == 2);
  REQUIRE(sgd.lr(0) == 0.5);
  REQUIRE(sgd.lr(1) == 0.01);
  set_grad(a, {1.0, -2.0});
  set_grad(b, {4.0});
  sgd.step();
  // a = (1 - 0.5, 2 + 1) = (0.5, 3);  b = 3 - 0.01 * 4 = 2.96
  test::require_close(a, {0.5, 3.0}, 1e-15, 0, "group 0");
  test::require_close(b, {2.96}, 1e-15, 0, "group 1");

  sgd.set_lr(1, 1.0);  // what a schedule does
  set_grad(b, {0.5});
  sgd.step();
  test::require_close(b, {2.46}, 1e-15, 0, "group 1 after set_lr");
}

TEST_CASE("optimizer: adam groups keep separate hyperparameters", "[optimizer][adam]") {
  Tensor a = leaf({1.0});
  Tensor b = leaf({1.0});
  AdamOptions first, second;
  first.lr = 0.1;
  second.lr = 0.01;
  Adam adam({AdamGroup{{a}, first}, AdamGroup{{b}, second}});
  set_grad(a, {2.0});
  set_grad(b, {2.0});
  adam.step();
  // First Adam step moves by lr * g / (|g| + eps) = lr (up to 5e-9 relative).
  test::require_close(a, {0.9}, 1e-8, 0, "a");
  test::require_close(b, {0.99}, 1e-8, 0, "b");
}

TEST_CASE("optimizer: parameters without a gradient are skipped", "[optimizer][adam]") {
  Tensor a = leaf({1.0, 1.0});
  Tensor b = leaf({5.0});
  AdamOptions options;
  options.lr = 0.1;
  options.weight_decay = 0.5;  // would move b even with a zero gradient
  Adam adam({a, b}, options);
  set_grad(a, {1.0, -1.0});
  adam.step();
  test::require_close(b, {5.0}, 0, 0, "b untouched");
  auto state = adam.state_dict();
  REQUIRE(state.count("state.0.step") == 1);
  REQUIRE(state.count("state.1.step") == 0);  // no state created for b
  REQUIRE(state.at("state.0.step").to_indices() == std::vector<int64_t>{1});

  // b's first update is its own step 1 even though a is at step 2.
  set_grad(b, {1.0});
  adam.step();
  state = adam.state_dict();
  REQUIRE(state.at("state.0.step").to_indices() == std::vector<int64_t>{2});
  REQUIRE(state.at("state.1.step").to_indices() == std::vector<int64_t>{1});
}

TEST_CASE("optimizer: zero_grad resets gradients to undefined", "[optimizer][sgd]") {
  Tensor a = leaf({1.0});
  Sgd sgd({a}, SgdOptions());
  set_grad(a, {1.0});
  REQUIRE(a.grad().defined());
  sgd.zero_grad();
  REQUIRE_FALSE(a.grad().defined());
}

TEST_CASE("optimizer: exported state resumes training exactly", "[optimizer][adam][sgd]") {
  const std::vector<std::vector<double>> grads = {{0.3, -0.7}, {1.1, 0.2}, {-0.4, 0.9}};
  SECTION("adam") {
    AdamOptions options;
    options.lr = 0.05;
    Tensor straight = leaf({0.5, -0.5});
    Adam reference({straight}, options);
    for (const auto& g : grads) {
      set_grad(straight, g);
      reference.step();
    }
    Tensor resumed = leaf({0.5, -0.5});
    auto first = std::make_unique<Adam>(std::vector<Tensor>{resumed}, options);
    set_grad(resumed, grads[0]);
    first->step();
    auto saved = first->state_dict();
    REQUIRE(saved.size() == 3);  // step, exp_avg, exp_avg_sq of parameter 0
    first.reset();
    Adam second({resumed}, options);
    second.load_state_dict(saved);
    for (size_t s = 1; s < grads.size(); ++s) {
      set_grad(resumed, grads[s]);
      second.step();
    }
    test::require_close(resumed, straight.to_vector(), 0, 0, "resumed adam");
  }
  SECTION("sgd with momentum") {
    SgdOptions options;
    options.lr = 0.1;
    options.momentum = 0.9;
    Tensor straight = leaf({0.5, -0.5});
    Sgd reference({straight}, options);
    for (const auto& g : grads) {
      set_grad(straight, g);
      reference.step();
    }
    Tensor resumed = leaf({0.5, -0.5});
    Sgd first({resumed}, options);
    set_grad(resumed, grads[0]);
    first.step();
    auto saved = first.state_dict();
    REQUIRE(saved.count("state.0.momentum_buffer") == 1);
    Sgd second({resumed}, options);
    second.load_state_dict(saved);
    for (size_t s = 1; s < grads.size(); ++s) {
      set_grad(resumed, grads[s]);
      second.step();
    }
    test::require_close(resumed, straight.to_vector(), 0, 0, "resumed sgd");
  }
}

TEST_CASE("optimizer: load_state_dict lists every bad key", "[optimizer][adam]") {
  Tensor a = leaf({1.0, 2.0});
  Adam adam({a});
  engine::optim::OptimizerState bad;
  bad["state.0.step"] = Tensor::from_indices({3}, {});
  bad["state.0.exp_avg"] = Tensor::zeros({3}, DType::F64);          // wrong shape
  bad["state.0.momentum_buffer"] = Tensor::zeros({2}, DType::F64);  // not an Adam buffer
  bad["state.7.exp_avg_sq"] = Tensor::zeros({2}, DType::F64);       // no parameter 7
  bad["lr"] = Tensor::scalar(0.1);
  try {
    adam.load_state_dict(bad);
    FAIL("load_state_dict accepted a bad state");
  } catch (const engine::Error& e) {
    std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("adam"));
    CHECK_THAT(message, Catch::Contains("state.0.exp_avg'"));
    CHECK_THAT(message, Catch::Contains("state.0.momentum_buffer"));
    CHECK_THAT(message, Catch::Contains("state.7.exp_avg_sq"));
    CHECK_THAT(message, Catch::Contains("'lr'"));
  }
  // Nothing was loaded: the next step is a first step.
  set_grad(a, {1.0, 1.0});
  adam.step();
  REQUIRE(adam.state_dict().at("state.0.step").to_indices() == std::vector<int64_t>{1});
}

TEST_CASE("optimizer: a step count without its buffers is refused", "[optimizer][adam][sgd]") {
  Tensor a = leaf({1.0, 2.0});
  Tensor b = leaf({3.0});
  SECTION("adam: both moments are required beside a step") {
    Adam adam({a, b});
    engine::optim::OptimizerState partial;
    partial["state.0.step"] = Tensor::from_indices({40}, {});
    partial["state.0.exp_avg"] = Tensor::zeros({2}, DType::F64);  // exp_avg_sq missing
    partial["state.1.step"] = Tensor::from_indices({40}, {});     // both missing
    REQUIRE_THROWS_WITH(adam.load_state_dict(partial),
                        Catch::Contains("'state.0.exp_avg_sq' is missing") &&
                            Catch::Contains("'state.1.exp_avg' is missing") &&
                            Catch::Contains("'state.1.exp_avg_sq' is missing") &&
                            Catch::Contains("step count of 40"));
  }
  SECTION("sgd: the momentum buffer only where the group has momentum") {
    SgdOptions plain;
    plain.lr = 0.1;
    SgdOptions heavy = plain;
    heavy.momentum = 0.9;
    Sgd sgd({SgdGroup{{a}, plain}, SgdGroup{{b}, heavy}});
    engine::optim::OptimizerState steps_only;
    steps_only["state.0.step"] = Tensor::from_indices({5}, {});
    steps_only["state.1.step"] = Tensor::from_indices({5}, {});
    REQUIRE_THROWS_WITH(sgd.load_state_dict(steps_only),
                        Catch::Contains("'state.1.momentum_buffer' is missing") &&
                            !Catch::Contains("state.0.momentum_buffer"));
    steps_only["state.1.momentum_buffer"] = Tensor::zeros({1}, DType::F64);
    sgd.load_state_dict(steps_only);  // plain SGD keeps no buffer: a step alone is whole
  }
}

TEST_CASE("optimizer: invalid parameters are rejected", "[optimizer][sgd]") {
  Tensor a = leaf({1.0});
  REQUIRE_THROWS_WITH(Sgd({a, a}, SgdOptions()),
                      Catch::Contains("sgd") && Catch::Contains("more than once"));
  REQUIRE_THROWS_WITH(Sgd({Tensor()}, SgdOptions()),
                      Catch::Contains("sgd") && Catch::Contains("undefined"));
  Tensor non_leaf = engine::mul_scalar(a, 2.0);
  REQUIRE_THROWS_WITH(Sgd({non_leaf}, SgdOptions()),
                      Catch::Contains("sgd") && Catch::Contains("leaf"));
  REQUIRE_THROWS_WITH(Sgd({Tensor::from_indices({1}, {1})}, SgdOptions()),
                      Catch::Contains("sgd") && Catch::Contains("floating"));
}

TEST_CASE("optimizer: a gradient of another dtype is an error", "[optimizer][sgd]") {
  // It cannot get as far as the optimizer: set_grad (and backward) refuse it, so an f64
  // parameter never holds an f32 gradient for step() to misread.
  Tensor a = leaf({1.0, 2.0});
  Sgd sgd({a}, SgdOptions());
  REQUIRE_THROWS_WITH(
      a.set_grad(Tensor::zeros({2}, DType::F32)),
      Catch::Contains("set_grad: gradient is f32") && Catch::Contains("the tensor f64"));
  REQUIRE_FALSE(a.grad().defined());
  REQUIRE_NOTHROW(sgd.step());  // no gradient: nothing to do
  CHECK(a.to_vector() == std::vector<double>{1.0, 2.0});
}
