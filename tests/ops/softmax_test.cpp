// softmax, log_softmax and cross_entropy: hand-computed forward cases (including inputs whose
// exp overflows), f64 gradient checks along every dim, and errors (label range, shapes, dtypes).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/softmax/softmax.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tensors.h"

using engine::DType;
using engine::Shape;
using engine::Tensor;
using test::f64;

namespace {

// Row 0: exp(x) = [1, 2, 3], so softmax = [1/6, 2/6, 3/6]. Row 1: all equal and huge (exp
// overflows without the max subtraction), so softmax = [1/3, 1/3, 1/3].
Tensor two_rows() { return f64({0, std::log(2.0), std::log(3.0), 1000, 1000, 1000}, {2, 3}); }

}  // namespace

TEST_CASE("softmax: hand-computed rows, stable for large inputs", "[softmax]") {
  Tensor y = engine::softmax(two_rows(), 1);
  REQUIRE(y.shape() == Shape{2, 3});
  test::require_close(y, {1.0 / 6, 2.0 / 6, 3.0 / 6, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 1e-15, 1e-14,
                      "softmax dim 1");
}

TEST_CASE("softmax: along dim 0 (a strided line in memory)", "[softmax]") {
  // x = [[0, 5], [log 3, 5]]. Column 0 has exp = [1, 3] -> [1/4, 3/4]; column 1 is [5, 5] ->
  // [1/2, 1/2].
  Tensor x = f64({0, 5, std::log(3.0), 5}, {2, 2});
  test::require_close(engine::softmax(x, -2), {0.25, 0.5, 0.75, 0.5}, 1e-15, 1e-14, "dim 0");
}

TEST_CASE("log_softmax: hand-computed, stable for large inputs", "[log_softmax]") {
  const double l6 = std::log(6.0);
  Tensor y = engine::log_softmax(two_rows(), -1);
  test::require_close(
      y,
      {-l6, std::log(2.0) - l6, std::log(3.0) - l6, -std::log(3.0), -std::log(3.0), -std::log(3.0)},
      1e-13, 1e-13, "log_softmax");
  // f32 with logits whose exp overflows float: log_softmax([100, 100]) = [-log 2, -log 2].
  Tensor big = Tensor::from_vector({100, 100}, {2}, DType::F32);
  test::require_close(engine::log_softmax(big, 0), {-std::log(2.0), -std::log(2.0)}, 1e-6, 1e-6,
                      "f32");
}

TEST_CASE("cross_entropy: hand-computed mean over rows", "[cross_entropy]") {
  // Row 0: logits [0, log 2, log 3] -> softmax [1/6, 1/3, 1/2]; label 2 -> -log(1/2) = log 2.
  // Row 1: logits [0, 0, 0] -> 1/3 each; label 0 -> log 3. Mean: (log 2 + log 3) / 2 = log 6 / 2.
  Tensor logits = f64({0, std::log(2.0), std::log(3.0), 0, 0, 0}, {2, 3});
  Tensor labels = Tensor::from_indices({2, 0}, {2});
  Tensor loss = engine::cross_entropy(logits, labels);
  REQUIRE(loss.shape() == Shape{});
  REQUIRE(std::fabs(loss.item() - std::log(6.0) / 2) < 1e-14);
}

TEST_CASE("cross_entropy grad: softmax minus one-hot, over N", "[cross_entropy][grad]") {
  // Hand-computed: d loss / d logits = (softmax - onehot) / N for the case above.
  Tensor logits = f64({0, std::log(2.0), std::log(3.0), 0, 0, 0}, {2, 3});
  logits.set_requires_grad(true);
  Tensor labels = Tensor::from_indices({2, 0}, {2});
  Tensor d = engine::grad({engine::cross_entropy(logits, labels)}, {logits})[0];
  test::require_close(d, {1.0 / 12, 1.0 / 6, -1.0 / 4, (1.0 / 3 - 1) / 2, 1.0 / 6, 1.0 / 6}, 1e-15,
                      1e-14, "dlogits");

  auto f = [](const std::vector<Tensor>& in) {
    return engine::cross_entropy(in[0], Tensor::from_indices({4, 0, 2, 2}, {4}));
  };
  test::require_gradcheck(f, {test::random_leaf({4, 5}, 1, -2.0, 2.0)});
}

TEST_CASE("softmax grad: every dim of [2, 3, 4]", "[softmax][grad]") {
  for (int64_t dim : {0, 1, 2, -1}) {
    auto f = [dim](const std::vector<Tensor>& in) { return engine::softmax(in[0], dim); };
    test::require_gradcheck(f, {test::random_leaf({2, 3, 4}, 2, -2.0, 2.0)});
  }
}

TEST_CASE("log_softmax grad: every dim of [2, 3, 4]", "[log_softmax][grad]") {
  for (int64_t dim : {0, 1, 2, -1}) {
    auto f = [dim](const std::vector<Tensor>& in) { return engine::log_softmax(in[0], dim); };
    test::require_gradcheck(f, {test::random_leaf({2, 3, 4}, 3, -2.0, 2.0)});
  }
}

TEST_CASE("cross_entropy errors: label out of range, shapes, dtypes", "[cross_entropy]") {
  Tensor logits = f64({0, 1, 2, 3, 4, 5}, {2, 3});
  REQUIRE_THROWS_WITH(
      engine::cross_entropy(logits, Tensor::from_indices({0, 3}, {2})),
      Catch::Contains("cross_entropy") && Catch::Contains("label 3") && Catch::Contains("[0, 3)"));
  REQUIRE_THROWS_WITH(engine::cross_entropy(logits, Tensor::from_indices({-1, 0}, {2})),
                      Catch::Contains("cross_entropy") && Catch::Contains("label -1"));
  REQUIRE_THROWS_WITH(engine::cross_entropy(logits, Tensor::from_indices({0, 1, 2}, {3})),
                      Catch::Contains("cross_entropy"));
  REQUIRE_THROWS_WITH(engine::cross_entropy(logits, f64({0, 1}, {2})),
                      Catch::Contains("cross_entropy") && Catch::Contains("i64"));
  REQUIRE_THROWS_WITH(engine::cross_entropy(f64({0, 1}, {2}), Tensor::from_indices({0}, {1})),
                      Catch::Contains("cross_entropy"));
  REQUIRE_THROWS_WITH(
      engine::cross_entropy(Tensor::zeros({0, 3}, DType::F64), Tensor::from_indices({}, {0})),
      Catch::Contains("cross_entropy"));
}

TEST_CASE("softmax errors: dim out of range, integer input", "[softmax][log_softmax]") {
  REQUIRE_THROWS_WITH(engine::softmax(two_rows(), 2), Catch::Contains("softmax"));
  REQUIRE_THROWS_WITH(engine::log_softmax(two_rows(), -3), Catch::Contains("log_softmax"));
  REQUIRE_THROWS_WITH(engine::softmax(Tensor::from_indices({1, 2}, {2}), 0),
                      Catch::Contains("softmax"));
}

TEST_CASE("cross_entropy kernel: cross_entropy_cpu rejects a bad label", "[cross_entropy]") {
  std::vector<double> logits{0, 0}, lse(1);
  std::vector<int64_t> labels{2};
  double loss = 0;
  REQUIRE_THROWS_WITH(engine::kernels::cross_entropy_cpu<double>(logits.data(), labels.data(), 1, 2,
                                                                 &loss, lse.data()),
                      Catch::Contains("cross_entropy"));
}
