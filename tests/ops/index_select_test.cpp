// index_select: rows by hand, the scatter-add backward by hand, gradient checks, errors.
#include <catch2/catch.hpp>

#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"

using engine::DType;
using engine::Shape;
using engine::Tensor;

TEST_CASE("index_select: repeated rows by hand, f32 and f64", "[index_select]") {
  // x = [[1, 2], [3, 4], [5, 6]], index [2, 0, 2] -> [[5, 6], [1, 2], [5, 6]]
  for (DType dtype : {DType::F32, DType::F64}) {
    Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}, dtype);
    Tensor out = engine::index_select(x, Tensor::from_indices({2, 0, 2}, {3}));
    REQUIRE(out.shape() == Shape{3, 2});
    REQUIRE(out.dtype() == dtype);
    test::require_close(out, {5, 6, 1, 2, 5, 6}, 0.0, 0.0, "rows");
  }
}

TEST_CASE("index_select: any rank, strided x, empty index, integer x", "[index_select]") {
  // x [3, 1, 2] = [[[0, 1]], [[2, 3]], [[4, 5]]]; index [1] -> [[[2, 3]]]
  Tensor x = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {3, 1, 2}, DType::F64);
  Tensor out = engine::index_select(x, Tensor::from_indices({1}, {1}));
  REQUIRE(out.shape() == Shape{1, 1, 2});
  test::require_close(out, {2, 3}, 0.0, 0.0, "3-D");
  // [[0, 1, 2], [3, 4, 5]]^T = [[0, 3], [1, 4], [2, 5]]; rows 2 and 1 -> [[2, 5], [1, 4]]
  Tensor t = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {2, 3}, DType::F64).transpose(0, 1);
  test::require_close(engine::index_select(t, Tensor::from_indices({2, 1}, {2})), {2, 5, 1, 4}, 0.0,
                      0.0, "transposed x");
  REQUIRE(engine::index_select(x, Tensor::from_indices({}, {0})).shape() == Shape{0, 1, 2});
  Tensor labels = Tensor::from_indices({10, 20, 30}, {3});
  REQUIRE(engine::index_select(labels, Tensor::from_indices({2, 2, 0}, {3})).to_indices() ==
          std::vector<int64_t>{30, 30, 10});
}

TEST_CASE("index_select grad: repeated indices accumulate, by hand", "[index_select][grad]") {
  // d sum(x[index]) / dx = how often each row is picked: row 0 once, row 1 never, row 2 twice.
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}, DType::F64);
  x.set_requires_grad(true);
  engine::backward(engine::sum(engine::index_select(x, Tensor::from_indices({2, 0, 2}, {3}))));
  test::require_close(x.grad(), {1, 1, 0, 0, 2, 2}, 0.0, 0.0, "row counts");
}

TEST_CASE("index_select grad: 3-D x with repeated indices", "[index_select][grad]") {
  Tensor x = test::random_leaf({4, 2, 3}, 1);
  Tensor index = Tensor::from_indices({3, 1, 3, 0, 3}, {5});
  test::require_gradcheck(
      [index](const std::vector<Tensor>& xs) { return engine::index_select(xs[0], index); }, {x});
}

TEST_CASE("index_select errors: out of range, dtype and rank of the index", "[index_select]") {
  Tensor x = Tensor::zeros({3, 2});
  REQUIRE_THROWS_WITH(
      engine::index_select(x, Tensor::from_indices({0, 3}, {2})),
      Catch::Contains("index_select") && Catch::Contains("out of range") && Catch::Contains("3"));
  REQUIRE_THROWS_WITH(engine::index_select(x, Tensor::from_indices({-1}, {1})),
                      Catch::Contains("index_select") && Catch::Contains("out of range"));
  REQUIRE_THROWS_WITH(engine::index_select(x, Tensor::zeros({2})),
                      Catch::Contains("index_select") && Catch::Contains("i64"));
  REQUIRE_THROWS_WITH(engine::index_select(x, Tensor::from_indices({0, 1}, {1, 2})),
                      Catch::Contains("index_select") && Catch::Contains("1-D"));
  REQUIRE_THROWS_WITH(engine::index_select(Tensor::scalar(1.0), Tensor::from_indices({0}, {1})),
                      Catch::Contains("index_select"));
}
