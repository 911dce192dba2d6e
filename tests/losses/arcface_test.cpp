// ArcFace loss (losses/arcface.h): hand-computed logits and loss, gradient check in embeddings
// and centers, the centers' own parameter group, and argument errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/optim/adam.h"
#include "losses/arcface.h"
#include "tests/losses/helpers.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"

using engine::Tensor;
using losses_test::f64;
using losses_test::labels_of;

TEST_CASE("arcface loss: hand-computed logits and loss, margin 0.5, scale 16",
          "[losses][arcface]") {
  // Centers w0 = (1, 0), w1 = (0, 1) (any length: they are normalized).
  // Row 0: x = (sqrt 3, 1), label 0: cos to w0 = cos 30deg = 0.866025, theta = 0.523599 rad;
  //   target logit 16 cos(0.523599 + 0.5) = 16 * 0.520296 = 8.324736; other 16 * 0.5 = 8.
  //   CE = log(1 + e^{8 - 8.324736}) = log(1 + 0.722776) = 0.543903.
  // Row 1: x = (-1, 1), label 1: cos to w1 = 0.707107 (45deg): target 16 cos(0.785398 + 0.5) =
  //   16 * 0.281540 = 4.504632; other 16 * (-0.707107) = -11.313708.
  //   CE = log(1 + e^{-15.818341}) = 1.35e-7.
  // Mean 0.271952.
  engine::Generator gen(0);
  losses::ArcFaceLoss criterion(2, 2, gen, {}, engine::DType::F64);
  Tensor centers = criterion.centers();  // a handle: copy_ writes the module's parameter
  centers.copy_(f64({2, 0, 0, 3}, {2, 2}));
  Tensor x = f64({std::sqrt(3.0), 1, -1, 1}, {2, 2});
  Tensor y = labels_of({0, 1});
  test::require_close(criterion.logits(x, y), {8.324736, 8.0, -11.313708, 4.504632}, 2e-6, 0,
                      "logits");
  CHECK(criterion.loss(x, y).item() == Approx(0.2719517).margin(1e-6));
}

TEST_CASE("arcface loss revisiting_compat: the Revisiting-DML code's margin-free logits",
          "[losses][arcface]") {
  // That code adds s (cos(theta + m) - cos theta) to every logit of the row (its one-hot is not
  // applied) after clamping all cosines to [1e-10, 1 - 1e-10]. Row 0 of the hand case above:
  // cos = (0.8660254, 0.5), shift 0.5202960 - 0.8660254 = -0.3457294 on both: logits
  // 16 * (0.5202960, 0.1542706) = (8.324736, 2.468330). Row 1: cos (-0.7071068 -> 1e-10,
  // 0.7071068), shift 0.2815395 - 0.7071068 = -0.4255673: logits 16 * (-0.4255673, 0.2815395) =
  // (-6.809076, 4.504632).
  engine::Generator gen(0);
  losses::ArcFaceOptions options;
  options.revisiting_compat = true;
  losses::ArcFaceLoss criterion(2, 2, gen, options, engine::DType::F64);
  Tensor(criterion.centers()).copy_(f64({2, 0, 0, 3}, {2, 2}));
  const Tensor x = f64({std::sqrt(3.0), 1, -1, 1}, {2, 2});
  const Tensor y = labels_of({0, 1});
  test::require_close(criterion.logits(x, y), {8.324736, 2.468330, -6.809076, 4.504632}, 2e-6, 0,
                      "logits");
  // The row shift cancels in cross-entropy: the loss is that of s * clamp(cos) with any margin.
  const Tensor plain = engine::cross_entropy(
      engine::clamp(f64({0.8660254, 0.5, -0.7071068, 0.7071068}, {2, 2}), 1e-10, 1.0 - 1e-10) *
          16.0,
      y);
  CHECK(criterion.loss(x, y).item() == Approx(plain.item()).margin(1e-6));
  options.margin = 0.1;
  losses::ArcFaceLoss small_margin(2, 2, gen, options, engine::DType::F64);
  Tensor(small_margin.centers()).copy_(f64({2, 0, 0, 3}, {2, 2}));
  CHECK(small_margin.loss(x, y).item() == Approx(criterion.loss(x, y).item()).margin(1e-12));
}

TEST_CASE("arcface loss grad: embeddings and class centers", "[losses][arcface][grad]") {
  // Scale 4 keeps the softmax away from saturation so every element has a sizable gradient.
  engine::Generator gen(1);
  losses::ArcFaceOptions options;
  options.scale = 4.0;
  losses::ArcFaceLoss criterion(3, 4, gen, options, engine::DType::F64);
  Tensor x = test::random_leaf({5, 4}, 71);
  Tensor y = labels_of({0, 2, 1, 2, 0});
  test::require_gradcheck([&](const std::vector<Tensor>& in) { return criterion.loss(in[0], y); },
                          {x, criterion.centers()});
}

TEST_CASE("arcface loss: centers in their own Adam group with lr 5e-4", "[losses][arcface]") {
  engine::Generator gen(2);
  losses::ArcFaceLoss criterion(10, 8, gen);
  CHECK(criterion.num_classes() == 10);
  CHECK(criterion.centers().shape() == engine::Shape{10, 8});
  // Initialization uniform in [-1/sqrt 8, 1/sqrt 8].
  for (double v : criterion.centers().to_vector()) CHECK(std::fabs(v) <= 1.0 / std::sqrt(8.0));
  CHECK(criterion.parameters().size() == 1);
  CHECK(criterion.state_dict().contains("centers"));
  engine::optim::AdamGroup group = criterion.param_group();
  CHECK(group.options.lr == 5e-4);
  CHECK(group.params[0].same_as(criterion.centers()));

  // A training step moves the centers with their own rate: Adam's first step moves each
  // element with a nonzero gradient by lr (m / sqrt v = sign(g)), so by at most 5e-4.
  engine::Generator data_gen(3);
  Tensor x = engine::normal({6, 8}, 0, 1, data_gen);
  const std::vector<double> before = criterion.centers().to_vector();
  engine::optim::Adam adam({criterion.param_group()});
  engine::backward(criterion.loss(x, labels_of({0, 1, 2, 3, 4, 5})));
  adam.step();
  const std::vector<double> after = criterion.centers().to_vector();
  double max_move = 0;
  for (size_t i = 0; i < before.size(); ++i)
    max_move = std::max(max_move, std::fabs(after[i] - before[i]));
  CHECK(max_move == Approx(5e-4).epsilon(1e-3));
}

TEST_CASE("arcface loss: errors name the label, shapes and dtype", "[losses][arcface]") {
  engine::Generator gen(4);
  losses::ArcFaceLoss criterion(3, 2, gen);
  Tensor x = Tensor::from_vector({1, 0, 0, 1}, {2, 2});
  REQUIRE_THROWS_WITH(criterion.loss(x, labels_of({0, 3})),
                      Catch::Contains("arcface") && Catch::Contains("label 3"));
  REQUIRE_THROWS_WITH(criterion.loss(Tensor::zeros({2, 5}), labels_of({0, 1})),
                      Catch::Contains("arcface") && Catch::Contains("centers"));
  REQUIRE_THROWS_WITH(criterion.loss(f64({1, 0, 0, 1}, {2, 2}), labels_of({0, 1})),
                      Catch::Contains("dtype"));
  REQUIRE_THROWS_WITH(criterion.forward(x), Catch::Contains("ArcFaceLoss"));
}
