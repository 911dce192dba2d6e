// add, sub, mul, div with NumPy broadcasting, and sum_to_shape: hand-computed forward cases (the
// kernel alone and through the ops), f64 gradient checks over broadcast patterns, the `needs`
// mask, and argument errors.
#include <catch2/catch.hpp>

#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/binary/binary.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tensors.h"

using engine::DType;
using engine::Shape;
using engine::Tensor;
using test::f64;

TEST_CASE("binary kernel: stride-0 broadcast of a column against a row", "[binary]") {
  using engine::kernels::BinaryOp;
  using engine::kernels::StridedLayout;
  // a = [1, 2] as a column [2, 1], b = [10, 20, 30] as a row [1, 3]; out[i][j] = a_i * b_j.
  std::vector<double> a{1, 2}, b{10, 20, 30}, out(6, 0.0);
  StridedLayout a_layout{2, {2, 3}, {1, 0}};
  StridedLayout b_layout{2, {2, 3}, {0, 1}};
  StridedLayout out_layout{2, {2, 3}, {3, 1}};
  engine::kernels::binary_cpu<double>(BinaryOp::Mul, a.data(), a_layout, b.data(), b_layout,
                                      out.data(), out_layout);
  REQUIRE(out == std::vector<double>{10, 20, 30, 20, 40, 60});
}

TEST_CASE("add: [2, 3] + [3] broadcasts the row", "[add]") {
  // [[1, 2, 3], [4, 5, 6]] + [10, 20, 30] = [[11, 22, 33], [14, 25, 36]]
  Tensor out = engine::add(f64({1, 2, 3, 4, 5, 6}, {2, 3}), f64({10, 20, 30}, {3}));
  REQUIRE(out.shape() == Shape{2, 3});
  test::require_close(out, {11, 22, 33, 14, 25, 36}, 0, 0, "add");
}

TEST_CASE("sub: [3, 1] - [1, 4] broadcasts both ways", "[sub]") {
  // out[i][j] = a_i - b_j with a = [1, 2, 3], b = [10, 20, 30, 40].
  Tensor out = engine::sub(f64({1, 2, 3}, {3, 1}), f64({10, 20, 30, 40}, {1, 4}));
  REQUIRE(out.shape() == Shape{3, 4});
  test::require_close(out, {-9, -19, -29, -39, -8, -18, -28, -38, -7, -17, -27, -37}, 0, 0, "sub");
}

TEST_CASE("mul: a scalar-shaped [] tensor times [2, 2], in f32", "[mul]") {
  // 3 * [[1, 2], [3, 4]] = [[3, 6], [9, 12]]; the result keeps the larger shape.
  Tensor three = Tensor::scalar(3.0, DType::F32);
  Tensor x = Tensor::from_vector({1, 2, 3, 4}, {2, 2}, DType::F32);
  Tensor out = engine::mul(three, x);
  REQUIRE(out.shape() == Shape{2, 2});
  REQUIRE(out.dtype() == DType::F32);
  test::require_close(out, {3, 6, 9, 12}, 0, 0, "mul");
  REQUIRE(engine::mul(three, three).shape() == Shape{});
}

TEST_CASE("div: [2, 2] / [2, 1] divides each row by its own value", "[div]") {
  // [[1, 2], [3, 4]] / [[2], [4]] = [[0.5, 1], [0.75, 1]]
  Tensor out = engine::div(f64({1, 2, 3, 4}, {2, 2}), f64({2, 4}, {2, 1}));
  test::require_close(out, {0.5, 1, 0.75, 1}, 0, 0, "div");
}

TEST_CASE("add: a transposed (strided) input is read through its strides", "[add]") {
  // x = [[1, 2, 3], [4, 5, 6]]; x^T = [[1, 4], [2, 5], [3, 6]]; x^T + [100, 200].
  Tensor xt = f64({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);
  Tensor out = engine::add(xt, f64({100, 200}, {2}));
  REQUIRE(out.shape() == Shape{3, 2});
  test::require_close(out, {101, 204, 102, 205, 103, 206}, 0, 0, "add");
}

TEST_CASE("sum_to_shape: sums over leading and size-1 dims", "[sum_to_shape]") {
  Tensor g = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  // Column sums [5, 7, 9]; row sums [[6], [15]]; everything 21.
  test::require_close(engine::sum_to_shape(g, {3}), {5, 7, 9}, 0, 0, "to [3]");
  Tensor rows = engine::sum_to_shape(g, {2, 1});
  REQUIRE(rows.shape() == Shape{2, 1});
  test::require_close(rows, {6, 15}, 0, 0, "to [2, 1]");
  Tensor all = engine::sum_to_shape(g, {});
  REQUIRE(all.shape() == Shape{});
  REQUIRE(all.item() == 21.0);
  Tensor ones_row = engine::sum_to_shape(g, {1, 3});
  REQUIRE(ones_row.shape() == Shape{1, 3});
  test::require_close(ones_row, {5, 7, 9}, 0, 0, "to [1, 3]");
  REQUIRE(engine::sum_to_shape(g, {2, 3}).shape() == Shape{2, 3});
}

TEST_CASE("add grad: [3, 1] + [1, 4] and same shapes", "[add][grad]") {
  auto f = [](const std::vector<Tensor>& in) { return engine::add(in[0], in[1]); };
  test::require_gradcheck(f, {test::random_leaf({3, 1}, 1), test::random_leaf({1, 4}, 2)});
  test::require_gradcheck(f, {test::random_leaf({2, 3}, 3), test::random_leaf({2, 3}, 4)});
}

TEST_CASE("sub grad: [2, 3, 4] - [4] and [] - [2, 3]", "[sub][grad]") {
  auto f = [](const std::vector<Tensor>& in) { return engine::sub(in[0], in[1]); };
  test::require_gradcheck(f, {test::random_leaf({2, 3, 4}, 5), test::random_leaf({4}, 6)});
  test::require_gradcheck(f, {test::random_leaf({}, 7), test::random_leaf({2, 3}, 8)});
}

TEST_CASE("mul grad: [2, 3, 4] * [3, 1], [] * [2, 3] and x * x", "[mul][grad]") {
  auto f = [](const std::vector<Tensor>& in) { return engine::mul(in[0], in[1]); };
  test::require_gradcheck(f, {test::random_leaf({2, 3, 4}, 9), test::random_leaf({3, 1}, 10)});
  test::require_gradcheck(f, {test::random_leaf({}, 11), test::random_leaf({2, 3}, 12)});
  // The same tensor as both operands: its two gradient contributions add up to 2x.
  auto square = [](const std::vector<Tensor>& in) { return engine::mul(in[0], in[0]); };
  test::require_gradcheck(square, {test::random_leaf({2, 3}, 13)});
}

TEST_CASE("div grad: [3, 1] / [1, 4] and [2, 3, 4] / [4], divisors away from 0", "[div][grad]") {
  auto f = [](const std::vector<Tensor>& in) { return engine::div(in[0], in[1]); };
  test::require_gradcheck(f,
                          {test::random_leaf({3, 1}, 14), test::random_leaf({1, 4}, 15, 0.5, 1.5)});
  test::require_gradcheck(
      f, {test::random_leaf({2, 3, 4}, 16), test::random_leaf({4}, 17, -1.5, -0.5)});
}

TEST_CASE("sum_to_shape grad: [2, 3, 4] to [3, 1]", "[sum_to_shape][grad]") {
  auto f = [](const std::vector<Tensor>& in) { return engine::sum_to_shape(in[0], {3, 1}); };
  test::require_gradcheck(f, {test::random_leaf({2, 3, 4}, 18)});
}

TEST_CASE("mul grad: only the requested input's gradient is computed", "[mul][grad]") {
  Tensor a = test::random_leaf({2, 3}, 19);
  Tensor b = test::random_leaf({3}, 20);
  engine::GradTrace trace;
  std::vector<Tensor> grads = engine::grad({engine::sum(engine::mul(a, b))}, {a});
  REQUIRE(trace.contains("mul:0"));
  REQUIRE_FALSE(trace.contains("mul:1"));
  // d(sum a*b)/da = b broadcast over the rows.
  std::vector<double> bv = b.to_vector();
  test::require_close(grads[0], {bv[0], bv[1], bv[2], bv[0], bv[1], bv[2]}, 0, 0, "dL/da");
}

TEST_CASE("add errors: incompatible shapes, dtype mismatch, integer inputs", "[add][mul]") {
  Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  REQUIRE_THROWS_WITH(engine::add(a, f64({1, 2, 3, 4}, {4})), Catch::Contains("add") &&
                                                                  Catch::Contains("[2, 3]") &&
                                                                  Catch::Contains("[4]"));
  REQUIRE_THROWS_WITH(
      engine::sub(f64({1, 2, 3, 4}, {2, 1, 2}), f64({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3})),
      Catch::Contains("sub"));
  Tensor a32 = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::F32);
  REQUIRE_THROWS_WITH(engine::mul(a32, a), Catch::Contains("mul") && Catch::Contains("f64"));
  Tensor idx = Tensor::from_indices({1, 2}, {2});
  REQUIRE_THROWS_WITH(engine::div(idx, idx), Catch::Contains("div"));
  REQUIRE_THROWS_WITH(engine::sum_to_shape(a, {4}), Catch::Contains("sum_to_shape"));
  REQUIRE_THROWS_WITH(engine::sum_to_shape(a, {1, 2, 3}), Catch::Contains("sum_to_shape"));
}
