// Margin loss with learnable beta (losses/margin.h): hand-computed value with active-term means,
// robrank's normalization for E, gradient checks including beta, beta's own SGD group and state.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/optim/sgd.h"
#include "losses/margin.h"
#include "tests/losses/helpers.h"
#include "tests/support/gradcheck.h"

using engine::Tensor;
using losses::Metric;
using losses_test::f64;
using losses_test::index;
using losses_test::labels_of;
using losses_test::make_triplets;

namespace {

// Unit rows (1,0), (0.6,0.8), (0.8,0.6), (0,1).
Tensor unit_rows(double scale) {
  return f64({scale, 0, 0.6 * scale, 0.8 * scale, 0.8 * scale, 0.6 * scale, 0, scale}, {4, 2});
}

}  // namespace

TEST_CASE("margin loss: hand-computed with beta 0.6, margin 0.2", "[losses][margin]") {
  // t0 = (0, 1, 2): d(a,p) = sqrt 0.8 = 0.894427 -> l+ = 0.894427 - 0.6 + 0.2 = 0.494427;
  //   d(a,n) = sqrt 0.4 = 0.632456 -> l- = 0.6 - 0.632456 + 0.2 = 0.167544.
  // t1 = (2, 1, 3): d(a,p) = |(0.2,-0.2)| = 0.282843 -> l+ = max(0, -0.117) = 0;
  //   d(a,n) = |(0.8,-0.4)| = 0.894427 -> l- = max(0, -0.094) = 0.
  // Means over the active terms only: 0.494427 / 1 + 0.167544 / 1 = 0.661971 (a plain mean
  // would halve it).
  losses::MarginLoss criterion(Metric::N, {}, engine::DType::F64);
  losses::Triplets t = make_triplets({0, 2}, {1, 1}, {2, 3});
  CHECK(criterion.loss(unit_rows(1.0), t).item() == Approx(0.6619717).margin(3e-6));
  // robrank normalizes for E as well: scaling the rows by 5 changes nothing.
  losses::MarginLoss euclidean(Metric::E, {}, engine::DType::F64);
  CHECK(euclidean.loss(unit_rows(5.0), t).item() == Approx(0.6619717).margin(3e-6));
  // Nothing active gives 0, not NaN: beta 1.0 and margin -0.5 make l+ = d(a,p) - 1.5 < 0 and
  // l- = 0.5 - d(a,n) < 0 (d(a,n) = 0.632, 0.894) for both triplets.
  losses::MarginLoss off(Metric::N, {1.0, -0.5, 5e-4}, engine::DType::F64);
  CHECK(off.loss(unit_rows(1.0), t).item() == 0.0);
}

TEST_CASE("margin loss grad: embeddings and beta", "[losses][margin][grad]") {
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    losses::MarginLoss criterion(metric, {}, engine::DType::F64);
    Tensor x = test::random_leaf({6, 3}, 51);
    losses::Triplets t = make_triplets({0, 2, 4, 0}, {1, 3, 5, 1}, {2, 4, 0, 5});
    test::require_gradcheck([&](const std::vector<Tensor>& in) { return criterion.loss(in[0], t); },
                            {x, criterion.beta()});
  }
}

TEST_CASE("margin loss: beta has its own SGD group and state entry", "[losses][margin]") {
  losses::MarginLoss criterion;
  CHECK(criterion.beta().shape() == engine::Shape{});
  CHECK(criterion.beta().item() == Approx(0.6));
  CHECK(criterion.beta().requires_grad());
  CHECK(criterion.parameters().size() == 1);
  CHECK(criterion.state_dict().contains("beta"));
  engine::optim::SgdGroup group = criterion.param_group();
  CHECK(group.options.lr == 5e-4);
  REQUIRE(group.params.size() == 1);
  CHECK(group.params[0].same_as(criterion.beta()));

  // One SGD step on t0 of the hand case: dL/dbeta = -1 (l+ active) + 1 (l- active) = 0 there, so
  // use only the positive term: triplet (0, 1, 3): l+ active, l- = 0.8 - sqrt 2 < 0 inactive ->
  // dL/dbeta = -1 and beta moves to 0.6 + 5e-4.
  engine::optim::Sgd sgd({criterion.param_group()});
  losses::Triplets t;
  t.anchor = index({0});
  t.positive = index({1});
  t.negative = index({3});
  Tensor x = unit_rows(1.0).to(engine::DType::F32);
  engine::backward(criterion.loss(x, t));
  CHECK(criterion.beta().grad().item() == Approx(-1.0));
  sgd.step();
  CHECK(criterion.beta().item() == Approx(0.6 + 5e-4).epsilon(1e-6));
  REQUIRE_THROWS_WITH(criterion.forward(x), Catch::Contains("MarginLoss"));
}

TEST_CASE("margin loss: spc2 path mines and differentiates", "[losses][margin]") {
  losses::MarginLoss criterion;
  engine::Generator data_gen(8), gen(9);
  Tensor x = engine::normal({8, 4}, 0, 1, data_gen);
  x.set_requires_grad(true);
  engine::backward(
      criterion.spc2_loss(x, labels_of({0, 0, 1, 1, 2, 2, 3, 3}), losses::Miner::Random, gen));
  REQUIRE(x.grad().defined());
  REQUIRE(criterion.beta().grad().defined());
}
