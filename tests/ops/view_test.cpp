// Views: shapes and values by hand, storage sharing, strides, gradient checks, errors.
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

namespace {

// 0, 1, ..., n-1 as f64 with the given shape.
Tensor iota(const Shape& shape) {
  std::vector<double> values(static_cast<size_t>(engine::shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);
  return Tensor::from_vector(values, shape, DType::F64);
}

}  // namespace

// ---- values and geometry -----------------------------------------------------------------------

TEST_CASE("reshape: a contiguous tensor is viewed, -1 is inferred", "[reshape]") {
  Tensor x = iota({2, 3, 4});
  Tensor y = x.reshape({4, -1});
  REQUIRE(y.shape() == Shape{4, 6});
  REQUIRE(y.data<double>() == x.data<double>());  // same memory
  test::require_close(y, x.to_vector(), 0.0, 0.0, "row-major order kept");
  REQUIRE(x.reshape({-1}).shape() == Shape{24});
  REQUIRE(Tensor::scalar(3.0).reshape({1, 1}).shape() == Shape{1, 1});
  REQUIRE(Tensor::ones({1, 1}).reshape({}).shape() == Shape{});
}

TEST_CASE("reshape: a transposed tensor is copied in its logical order", "[reshape]") {
  // x = [[0, 1, 2], [3, 4, 5]]; x^T = [[0, 3], [1, 4], [2, 5]]; flattened: 0 3 1 4 2 5.
  Tensor t = iota({2, 3}).transpose(0, 1);
  Tensor flat = t.reshape({6});
  REQUIRE(flat.data<double>() != t.data<double>());
  test::require_close(flat, {0, 3, 1, 4, 2, 5}, 0.0, 0.0, "x^T flattened");
}

TEST_CASE("view: strided tensors are viewed when their strides allow it", "[view]") {
  // [2, 3, 4] with dims 0 and 1 swapped: shape [3, 2, 4], strides [4, 12, 1]. The last dim is
  // still contiguous, so it can be split; merging dims 0 and 1 cannot be done without a copy.
  Tensor t = iota({2, 3, 4}).transpose(0, 1);
  Tensor v = t.view({3, 2, 2, 2});
  REQUIRE(v.strides() == Shape{4, 12, 2, 1});
  REQUIRE(v.data<double>() == t.data<double>());
  test::require_close(v, t.contiguous().to_vector(), 0.0, 0.0, "split last dim");
  // Size-1 dims fit anywhere.
  REQUIRE(t.view({3, 1, 2, 4, 1}).shape() == Shape{3, 1, 2, 4, 1});
}

TEST_CASE("flatten: all dims, a range, and a scalar", "[flatten]") {
  Tensor x = iota({2, 3, 4, 5});
  REQUIRE(x.flatten().shape() == Shape{120});
  REQUIRE(x.flatten(1).shape() == Shape{2, 60});
  REQUIRE(x.flatten(1, 2).shape() == Shape{2, 12, 5});
  REQUIRE(x.flatten(-2, -1).shape() == Shape{2, 3, 20});
  REQUIRE(Tensor::scalar(2.0).flatten().shape() == Shape{1});
}

TEST_CASE("slice: Python bounds, steps, and shared storage", "[slice]") {
  Tensor x = iota({10});
  test::require_close(x.slice(0, 2, 9, 3), {2, 5, 8}, 0.0, 0.0, "2:9:3");
  test::require_close(x.slice(0, -3, 100), {7, 8, 9}, 0.0, 0.0, "-3:100");
  test::require_close(x.slice(0, -100, 2), {0, 1}, 0.0, 0.0, "-100:2");
  test::require_close(x.slice(0, 1, -4, 2), {1, 3, 5}, 0.0, 0.0, "1:-4:2");
  REQUIRE(x.slice(0, 5, 2).shape() == Shape{0});
  REQUIRE(x.slice(0, 12, 20).shape() == Shape{0});

  // [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]][:, 1:4:2] = [[1, 3], [5, 7], [9, 11]]
  Tensor m = iota({3, 4});
  Tensor columns = m.slice(1, 1, 4, 2);
  REQUIRE(columns.shape() == Shape{3, 2});
  REQUIRE(columns.strides() == Shape{4, 2});
  test::require_close(columns, {1, 3, 5, 7, 9, 11}, 0.0, 0.0, "columns");

  // Writing through the slice changes the base.
  columns.copy_(Tensor::full({3, 2}, -1.0, DType::F64));
  test::require_close(m, {0, -1, 2, -1, 4, -1, 6, -1, 8, -1, 10, -1}, 0.0, 0.0, "base");
  m.slice(0, 2, 3).fill_(7.0);
  test::require_close(m.select(0, 2), {7, 7, 7, 7}, 0.0, 0.0, "last row");
}

TEST_CASE("select: drops the dim, negative indices count from the end", "[select]") {
  Tensor m = iota({3, 4});
  test::require_close(m.select(0, 1), {4, 5, 6, 7}, 0.0, 0.0, "row 1");
  test::require_close(m.select(1, -1), {3, 7, 11}, 0.0, 0.0, "last column");
  REQUIRE(m.select(1, -1).shape() == Shape{3});
  REQUIRE(iota({3}).select(0, 2).shape() == Shape{});
  REQUIRE(iota({3}).select(0, 2).item() == 2.0);
}

TEST_CASE("transpose: swaps shape and strides, is not contiguous; contiguous() copies",
          "[transpose]") {
  Tensor x = iota({2, 3});
  Tensor t = x.transpose(0, 1);
  REQUIRE(t.shape() == Shape{3, 2});
  REQUIRE(t.strides() == Shape{1, 3});
  REQUIRE_FALSE(t.is_contiguous());
  test::require_close(t, {0, 3, 1, 4, 2, 5}, 0.0, 0.0, "x^T");
  Tensor c = t.contiguous();
  REQUIRE(c.is_contiguous());
  REQUIRE(c.data<double>() != x.data<double>());
  c.fill_(9.0);  // the copy is independent
  test::require_close(x, {0, 1, 2, 3, 4, 5}, 0.0, 0.0, "x unchanged");
  REQUIRE(x.transpose(-1, 0).shape() == Shape{3, 2});
}

TEST_CASE("expand: size-1 and new leading dims get stride 0", "[expand]") {
  Tensor col = iota({3, 1});  // [[0], [1], [2]]
  Tensor e = col.expand({2, 3, 4});
  REQUIRE(e.shape() == Shape{2, 3, 4});
  REQUIRE(e.strides() == Shape{0, 1, 0});
  std::vector<double> expected;
  for (int r = 0; r < 2; ++r) {
    for (double v : {0.0, 1.0, 2.0}) expected.insert(expected.end(), 4, v);
  }
  test::require_close(e, expected, 0.0, 0.0, "expanded");
  REQUIRE(col.expand({-1, 5}).shape() == Shape{3, 5});
}

TEST_CASE("unsqueeze and squeeze: insert and remove size-1 dims", "[unsqueeze][squeeze]") {
  Tensor x = iota({2, 3});
  REQUIRE(x.unsqueeze(0).shape() == Shape{1, 2, 3});
  REQUIRE(x.unsqueeze(1).shape() == Shape{2, 1, 3});
  REQUIRE(x.unsqueeze(-1).shape() == Shape{2, 3, 1});
  REQUIRE(x.unsqueeze(1).is_contiguous());
  REQUIRE(x.unsqueeze(2).squeeze(2).shape() == Shape{2, 3});
  REQUIRE(x.unsqueeze(0).squeeze(-3).shape() == Shape{2, 3});
  REQUIRE(x.squeeze(0).shape() == Shape{2, 3});  // size 2: unchanged, like PyTorch
  REQUIRE(x.unsqueeze(1).data<double>() == x.data<double>());
}

TEST_CASE("views: integer tensors and no-grad mode record nothing", "[view]") {
  Tensor labels = Tensor::from_indices({3, 1, 4, 1, 5, 9}, {6});
  Tensor picked = labels.slice(0, 1, 6, 2).reshape({3, 1}).transpose(0, 1);
  REQUIRE(picked.to_indices() == std::vector<int64_t>{1, 1, 9});
  REQUIRE(picked.is_leaf());

  Tensor x = test::random_leaf({2, 3}, 1);
  REQUIRE_FALSE(x.transpose(0, 1).is_leaf());
  engine::NoGradGuard no_grad;
  Tensor v = x.transpose(0, 1);
  REQUIRE(v.is_leaf());
  REQUIRE_FALSE(v.requires_grad());
}

// ---- gradients ---------------------------------------------------------------------------------

TEST_CASE("reshape grad: view, -1, and through a forced copy", "[reshape][grad]") {
  Tensor x = test::random_leaf({2, 3, 2}, 2);
  test::require_gradcheck(
      [](const std::vector<Tensor>& xs) {
        return xs[0].reshape({3, -1});
      },
      {x});
  // transpose then reshape: not viewable, so reshape copies (contiguous) and views the copy.
  test::require_gradcheck(
      [](const std::vector<Tensor>& xs) {
        return xs[0].transpose(0, 2).reshape({4, 3});
      },
      {x});
}

TEST_CASE("view grad: split and merge dims", "[view][grad]") {
  Tensor x = test::random_leaf({4, 3}, 3);
  test::require_gradcheck([](const std::vector<Tensor>& xs) { return xs[0].view({2, 2, 3}); }, {x});
  test::require_gradcheck(
      [](const std::vector<Tensor>& xs) {
        return xs[0].transpose(0, 1).view({3, 2, 2});
      },
      {x});
}

TEST_CASE("flatten grad: a middle range", "[flatten][grad]") {
  Tensor x = test::random_leaf({2, 2, 3, 2}, 4);
  test::require_gradcheck([](const std::vector<Tensor>& xs) { return xs[0].flatten(1, 2); }, {x});
}

TEST_CASE("slice grad: step 2, negative bounds, along dims 0 and 1", "[slice][grad]") {
  Tensor x = test::random_leaf({5, 4}, 5);
  test::require_gradcheck([](const std::vector<Tensor>& xs) { return xs[0].slice(0, 0, 5, 2); },
                          {x});
  test::require_gradcheck([](const std::vector<Tensor>& xs) { return xs[0].slice(1, -3, -1); },
                          {x});
  // Two overlapping slices of the same input: their gradients add up.
  test::require_gradcheck(
      [](const std::vector<Tensor>& xs) {
        return engine::add(xs[0].slice(0, 0, 3), xs[0].slice(0, 2, 5, 1));
      },
      {x});
}

TEST_CASE("select grad: a row and a negative column", "[select][grad]") {
  Tensor x = test::random_leaf({3, 4}, 6);
  test::require_gradcheck([](const std::vector<Tensor>& xs) { return xs[0].select(0, 1); }, {x});
  test::require_gradcheck([](const std::vector<Tensor>& xs) { return xs[0].select(1, -2); }, {x});
}

TEST_CASE("transpose grad: 3-D, outer and inner dims", "[transpose][grad]") {
  Tensor x = test::random_leaf({2, 3, 4}, 7);
  test::require_gradcheck([](const std::vector<Tensor>& xs) { return xs[0].transpose(0, 2); }, {x});
}

TEST_CASE("expand grad: a size-1 dim and a new leading dim", "[expand][grad]") {
  Tensor x = test::random_leaf({3, 1}, 8);
  test::require_gradcheck(
      [](const std::vector<Tensor>& xs) {
        return xs[0].expand({2, 3, 4});
      },
      {x});
}

TEST_CASE("unsqueeze and squeeze grad", "[unsqueeze][squeeze][grad]") {
  Tensor x = test::random_leaf({2, 3}, 9);
  test::require_gradcheck([](const std::vector<Tensor>& xs) { return xs[0].unsqueeze(1); }, {x});
  Tensor y = test::random_leaf({2, 1, 3}, 10);
  test::require_gradcheck([](const std::vector<Tensor>& xs) { return xs[0].squeeze(1); }, {y});
}

// ---- errors ------------------------------------------------------------------------------------

TEST_CASE("view errors: a transpose cannot be flattened without a copy", "[view]") {
  Tensor t = iota({2, 3}).transpose(0, 1);
  REQUIRE_THROWS_WITH(t.view({6}), Catch::Contains("view") && Catch::Contains("[3, 2]") &&
                                       Catch::Contains("reshape"));
  REQUIRE_NOTHROW(t.reshape({6}));
}

TEST_CASE("reshape errors: element counts and -1", "[reshape]") {
  Tensor x = iota({2, 3});
  REQUIRE_THROWS_WITH(x.reshape({4, 2}), Catch::Contains("reshape") && Catch::Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(x.reshape({-1, -1}), Catch::Contains("reshape"));
  REQUIRE_THROWS_WITH(x.reshape({4, -1}), Catch::Contains("reshape"));
  REQUIRE_THROWS_WITH(x.view({7}), Catch::Contains("view"));
}

TEST_CASE("slice, select, transpose, flatten errors: bad dims and indices", "[slice][select]") {
  Tensor x = iota({3, 4});
  REQUIRE_THROWS_WITH(x.slice(2, 0, 1), Catch::Contains("slice"));
  REQUIRE_THROWS_WITH(x.slice(0, 0, 3, 0), Catch::Contains("slice") && Catch::Contains("step"));
  REQUIRE_THROWS_WITH(x.select(0, 3), Catch::Contains("select") && Catch::Contains("3"));
  REQUIRE_THROWS_WITH(x.select(1, -5), Catch::Contains("select"));
  REQUIRE_THROWS_WITH(x.transpose(0, 2), Catch::Contains("transpose"));
  REQUIRE_THROWS_WITH(x.flatten(1, 0), Catch::Contains("flatten"));
  REQUIRE_THROWS_WITH(x.unsqueeze(3), Catch::Contains("unsqueeze"));
  REQUIRE_THROWS_WITH(x.squeeze(2), Catch::Contains("squeeze"));
}

TEST_CASE("expand errors: only size-1 dims grow", "[expand]") {
  Tensor x = iota({3, 1});
  REQUIRE_THROWS_WITH(x.expand({2, 2}), Catch::Contains("expand") && Catch::Contains("[3, 1]"));
  REQUIRE_THROWS_WITH(x.expand({1}), Catch::Contains("expand"));
  REQUIRE_THROWS_WITH(x.expand({-1, 3, 1}), Catch::Contains("expand"));
}
