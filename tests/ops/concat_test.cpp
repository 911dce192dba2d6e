// concat: values by hand along each dim, strided and integer inputs, gradient checks, errors.
#include <catch2/catch.hpp>

#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tensors.h"

using engine::DType;
using engine::Shape;
using engine::Tensor;
using test::f64;

TEST_CASE("concat: three inputs along dim 0 and dim 1, by hand", "[concat]") {
  // dim 0: [[1, 2], [3, 4]] ++ [[5, 6]] ++ [[7, 8], [9, 10], [11, 12]] stacks the rows.
  Tensor rows = engine::concat(
      {f64({1, 2, 3, 4}, {2, 2}), f64({5, 6}, {1, 2}), f64({7, 8, 9, 10, 11, 12}, {3, 2})}, 0);
  REQUIRE(rows.shape() == Shape{6, 2});
  test::require_close(rows, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 0.0, 0.0, "dim 0");

  // dim 1: [[1, 2], [3, 4]] ++ [[5], [6]] ++ [[7, 8, 9], [10, 11, 12]]
  //      = [[1, 2, 5, 7, 8, 9], [3, 4, 6, 10, 11, 12]]
  Tensor columns = engine::concat(
      {f64({1, 2, 3, 4}, {2, 2}), f64({5, 6}, {2, 1}), f64({7, 8, 9, 10, 11, 12}, {2, 3})}, 1);
  REQUIRE(columns.shape() == Shape{2, 6});
  test::require_close(columns, {1, 2, 5, 7, 8, 9, 3, 4, 6, 10, 11, 12}, 0.0, 0.0, "dim 1");
}

TEST_CASE("concat: a middle dim given as negative, f32", "[concat]") {
  // a [2, 1, 2] = [[[1, 2]], [[3, 4]]], b [2, 2, 2] = [[[5, 6], [7, 8]], [[9, 10], [11, 12]]]
  // along dim 1: [[[1, 2], [5, 6], [7, 8]], [[3, 4], [9, 10], [11, 12]]]
  Tensor a = Tensor::from_vector({1, 2, 3, 4}, {2, 1, 2});
  Tensor b = Tensor::from_vector({5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 2});
  Tensor out = engine::concat({a, b}, -2);
  REQUIRE(out.shape() == Shape{2, 3, 2});
  REQUIRE(out.dtype() == DType::F32);
  test::require_close(out, {1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12}, 0.0, 0.0, "dim -2");
}

TEST_CASE("concat: strided and integer inputs", "[concat]") {
  // [[1, 2], [3, 4]]^T = [[1, 3], [2, 4]], then the row [5, 6].
  Tensor t = f64({1, 2, 3, 4}, {2, 2}).transpose(0, 1);
  test::require_close(engine::concat({t, f64({5, 6}, {1, 2})}, 0), {1, 3, 2, 4, 5, 6}, 0.0, 0.0,
                      "transposed input");
  Tensor labels =
      engine::concat({Tensor::from_indices({4, 2}, {2}), Tensor::from_indices({7}, {1})}, 0);
  REQUIRE(labels.dtype() == DType::I64);
  REQUIRE(labels.to_indices() == std::vector<int64_t>{4, 2, 7});
}

TEST_CASE("concat grad: three inputs along dim 0", "[concat][grad]") {
  Tensor a = test::random_leaf({2, 3}, 1);
  Tensor b = test::random_leaf({1, 3}, 2);
  Tensor c = test::random_leaf({3, 3}, 3);
  test::require_gradcheck(
      [](const std::vector<Tensor>& xs) {
        return engine::concat({xs[0], xs[1], xs[2]}, 0);
      },
      {a, b, c});
}

TEST_CASE("concat grad: three inputs along dim 1", "[concat][grad]") {
  Tensor a = test::random_leaf({2, 1}, 4);
  Tensor b = test::random_leaf({2, 3}, 5);
  Tensor c = test::random_leaf({2, 2}, 6);
  test::require_gradcheck(
      [](const std::vector<Tensor>& xs) {
        return engine::concat({xs[0], xs[1], xs[2]}, 1);
      },
      {a, b, c});
}

TEST_CASE("concat grad: last dim of 3-D inputs, one input without grad", "[concat][grad]") {
  Tensor a = test::random_leaf({2, 2, 1}, 7);
  Tensor constant = f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  Tensor c = test::random_leaf({2, 2, 3}, 8);
  test::require_gradcheck(
      [](const std::vector<Tensor>& xs) {
        return engine::concat({xs[0], xs[1], xs[2]}, -1);
      },
      {a, constant, c});
  engine::GradTrace trace;
  engine::grad({engine::sum(engine::concat({a, constant, c}, -1))}, {c});
  REQUIRE(trace.contains("concat:2"));
  REQUIRE_FALSE(trace.contains("concat:0"));
  REQUIRE_FALSE(trace.contains("concat:1"));
}

TEST_CASE("concat errors: shapes, dtypes, dims, empty list", "[concat]") {
  Tensor a = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(
      engine::concat({a, Tensor::zeros({2, 4})}, 0),
      Catch::Contains("concat") && Catch::Contains("[2, 3]") && Catch::Contains("[2, 4]"));
  REQUIRE_THROWS_WITH(engine::concat({a, Tensor::zeros({2, 3, 1})}, 0), Catch::Contains("concat"));
  REQUIRE_THROWS_WITH(engine::concat({a, Tensor::zeros({2, 3}, DType::F64)}, 0),
                      Catch::Contains("concat"));
  REQUIRE_THROWS_WITH(engine::concat({a, a}, 2), Catch::Contains("concat"));
  REQUIRE_THROWS_WITH(engine::concat({}, 0), Catch::Contains("concat"));
  REQUIRE_THROWS_WITH(engine::concat({Tensor::scalar(1.0)}, 0), Catch::Contains("concat"));
  REQUIRE_THROWS_WITH(engine::concat({a, Tensor()}, 0), Catch::Contains("concat"));
}
