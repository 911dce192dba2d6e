// Layers: Linear and Conv2d against hand-computed outputs, the parameter-free layers, Sequential
// naming, and a finite-difference check that gradients reach module parameters.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "engine/autograd.h"
#include "engine/nn/nn.h"
#include "engine/ops.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"

using engine::DType;
using engine::Tensor;
namespace nn = engine::nn;

TEST_CASE("Linear: hand-computed forward", "[linear][module]") {
  nn::Linear linear(3, 2);
  linear.load_state_dict({{"weight", Tensor::from_vector({1, 2, 3, -1, 0, 1}, {2, 3})},
                          {"bias", Tensor::from_vector({0.5, -0.5}, {2})}});
  Tensor x = Tensor::from_vector({1, 1, 1, 2, 0, -1}, {2, 3});
  // Row 0: (1 + 2 + 3 + 0.5, -1 + 0 + 1 - 0.5) = (6.5, -0.5)
  // Row 1: (2 + 0 - 3 + 0.5, -2 + 0 - 1 - 0.5) = (-0.5, -3.5)
  Tensor y = linear(x);
  REQUIRE(y.shape() == engine::Shape{2, 2});
  test::require_close(y, {6.5, -0.5, -0.5, -3.5}, 1e-6, 0, "y");
}

TEST_CASE("Linear: without bias there is no bias parameter", "[linear][module]") {
  nn::Linear linear(4, 3, /*bias=*/false);
  CHECK_FALSE(linear.bias().defined());
  CHECK(linear.state_dict().keys() == std::vector<std::string>{"weight"});
  CHECK(linear(Tensor::zeros({2, 4})).shape() == engine::Shape{2, 3});
}

TEST_CASE("Conv2d: hand-computed forward, stride 1 and stride 2 with padding 1",
          "[conv2d][module]") {
  // x = 1..9 in a 3x3 image, weight [[1, 0], [0, -1]], bias 0.5:
  // out(i, j) = x(i, j) - x(i + 1, j + 1) + 0.5 with the window's top-left at (i, j).
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  nn::StateDict weights{{"weight", Tensor::from_vector({1, 0, 0, -1}, {1, 1, 2, 2})},
                        {"bias", Tensor::from_vector({0.5}, {1})}};
  SECTION("stride 1, no padding: every window gives x - (x + 4) + 0.5 = -3.5") {
    nn::Conv2d conv(1, 1, 2);
    conv.load_state_dict(weights);
    test::require_close(conv(x), {-3.5, -3.5, -3.5, -3.5}, 1e-6, 0, "y");
  }
  SECTION("stride 2, padding 1: windows at (-1,-1), (-1,1), (1,-1), (1,1)") {
    nn::Conv2d conv(1, 1, 2, /*stride=*/2, /*padding=*/1);
    conv.load_state_dict(weights);
    // (0 - 1 + .5, 0 - 3 + .5, 0 - 7 + .5, 5 - 9 + .5)
    Tensor y = conv(x);
    REQUIRE(y.shape() == engine::Shape{1, 1, 2, 2});
    test::require_close(y, {-0.5, -2.5, -6.5, -3.5}, 1e-6, 0, "y");
  }
  SECTION("dilation 2: the taps are x(0,0) and x(2,2)") {
    nn::Conv2d conv(1, 1, 2, /*stride=*/1, /*padding=*/0, /*dilation=*/2);
    conv.load_state_dict(weights);
    test::require_close(conv(x), {1 - 9 + 0.5}, 1e-6, 0, "y");
  }
}

TEST_CASE("Conv2d: weight layout is KCRS", "[conv2d][module]") {
  nn::Conv2d conv(3, 8, 5, 1, 2);
  CHECK(conv.weight().shape() == engine::Shape{8, 3, 5, 5});
  CHECK(conv.bias().shape() == engine::Shape{8});
  CHECK(conv(Tensor::zeros({2, 3, 7, 7})).shape() == engine::Shape{2, 8, 7, 7});
}

TEST_CASE("Sequential: children are named 0, 1, 2 and run in order", "[sequential][module]") {
  nn::Sequential seq;
  auto first = seq.push_back(std::make_shared<nn::Linear>(2, 4));
  seq.push_back(std::make_shared<nn::ReLU>());
  seq.push_back(std::make_shared<nn::Linear>(4, 1));
  CHECK(seq.size() == 3);
  CHECK(seq.state_dict().keys() ==
        std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(seq[0].get() == first.get());
  CHECK(seq(Tensor::zeros({5, 2})).shape() == engine::Shape{5, 1});
  REQUIRE_THROWS_WITH(seq[3], Catch::Contains("Sequential"));
  nn::Sequential empty;
  REQUIRE_THROWS_WITH(empty(Tensor::zeros({1})), Catch::Contains("Sequential"));
}

TEST_CASE("ReLU and Flatten: values and shapes", "[relu][flatten][module]") {
  nn::ReLU relu;
  test::require_close(relu(Tensor::from_vector({-1.5, 0.5, 2.0}, {3})), {0.0, 0.5, 2.0}, 0, 0,
                      "relu");
  nn::Flatten flatten;
  CHECK(flatten(Tensor::zeros({2, 3, 4, 5})).shape() == engine::Shape{2, 60});
  CHECK(nn::Flatten(0)(Tensor::zeros({2, 3})).shape() == engine::Shape{6});
}

TEST_CASE("MaxPool2d: stride defaults to the kernel size", "[max_pool2d][module]") {
  // 4x4 image 1..16, 2x2 windows, stride 2: maxima 6, 8, 14, 16.
  std::vector<double> values;
  for (int i = 1; i <= 16; ++i) values.push_back(i);
  Tensor x = Tensor::from_vector(values, {1, 1, 4, 4});
  nn::MaxPool2d pool(2);
  CHECK(pool.options().stride_h == 2);
  test::require_close(pool(x), {6, 8, 14, 16}, 0, 0, "max");
  // kernel 3, stride 2, padding 1 (ResNet's stem pool): windows centred on (0,0), (0,2), ...
  nn::MaxPool2d stem(3, 2, 1);
  test::require_close(stem(x), {6, 8, 14, 16}, 0, 0, "stem max");
}

TEST_CASE("AvgPool2d and AdaptiveAvgPool2d: hand-computed means", "[avg_pool2d][module]") {
  std::vector<double> values;
  for (int i = 1; i <= 16; ++i) values.push_back(i);
  Tensor x = Tensor::from_vector(values, {1, 1, 4, 4});
  // Windows {1,2,5,6}, {3,4,7,8}, {9,10,13,14}, {11,12,15,16}.
  test::require_close(nn::AvgPool2d(2)(x), {3.5, 5.5, 11.5, 13.5}, 1e-6, 0, "avg");
  Tensor global = nn::AdaptiveAvgPool2d()(x);
  CHECK(global.shape() == engine::Shape{1, 1, 1, 1});
  test::require_close(global, {8.5}, 1e-6, 0, "global avg");
}

TEST_CASE("Dropout: identity in eval, masks in training, reproducible with a generator",
          "[dropout][module]") {
  Tensor x = Tensor::ones({1000});
  engine::Generator gen(5);
  nn::Dropout dropout(0.25, &gen);
  dropout.eval();
  test::require_close(dropout(x), x, 0, 0, "eval");
  dropout.train();
  std::vector<double> y = dropout(x).to_vector();
  int zeros = 0;
  for (double v : y) {
    if (v == 0.0) {
      ++zeros;
    } else {
      REQUIRE(v == Approx(1.0 / 0.75));
    }
  }
  CHECK(zeros > 200);  // expected 250, standard deviation ~14
  CHECK(zeros < 300);
  engine::Generator again(5);
  nn::Dropout replay(0.25, &again);
  test::require_close(replay(x).to_vector(), y, 0, 0, "same seed, same mask");
  REQUIRE_THROWS_WITH(nn::Dropout(1.0), Catch::Contains("Dropout"));
}

TEST_CASE("Sequential grad: gradients reach every module parameter", "[sequential][grad]") {
  engine::Generator gen(3);
  nn::Sequential mlp;
  auto fc1 = mlp.push_back(std::make_shared<nn::Linear>(3, 4, true, gen));
  mlp.push_back(std::make_shared<nn::ReLU>());
  auto fc2 = mlp.push_back(std::make_shared<nn::Linear>(4, 2, true, gen));
  mlp.to(DType::F64);
  Tensor x = test::random_leaf({2, 3}, 11);
  // Inputs: x and every parameter (the module reads the same tensors the checker perturbs).
  std::vector<Tensor> inputs = {x};
  for (const Tensor& p : mlp.parameters()) inputs.push_back(p);
  // Kinks of ReLU: make sure no hidden pre-activation is near zero.
  {
    engine::NoGradGuard no_grad;
    for (double h : fc1->forward(x).to_vector()) REQUIRE(std::fabs(h) > 1e-3);
  }
  test::require_gradcheck([&](const std::vector<Tensor>&) { return mlp(x); }, inputs);
}

TEST_CASE("Conv2d grad: weight and bias of the module, stride 2, padding 1", "[conv2d][grad]") {
  engine::Generator gen(4);
  nn::Conv2d conv(2, 3, 3, 2, 1, 1, true, gen);
  conv.to(DType::F64);
  Tensor x = test::random_leaf({1, 2, 5, 5}, 12);
  test::require_gradcheck([&](const std::vector<Tensor>&) { return conv(x); },
                          {x, conv.weight(), conv.bias()});
}

TEST_CASE("Linear: errors name the op and the shapes", "[linear][module]") {
  nn::Linear linear(3, 2);
  REQUIRE_THROWS_WITH(linear(Tensor::zeros({2, 4})), Catch::Contains("linear"));
  REQUIRE_THROWS_WITH(nn::Linear(0, 2), Catch::Contains("Linear"));
  REQUIRE_THROWS_WITH(nn::Conv2d(1, 1, 3, 0), Catch::Contains("Conv2d"));
  REQUIRE_THROWS_WITH(nn::MaxPool2d(0), Catch::Contains("pool2d"));
}
