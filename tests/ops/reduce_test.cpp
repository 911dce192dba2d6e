// sum, mean (all elements and along dims, keepdim, negative dims) and logsumexp: hand-computed
// forward cases (kernels alone and through the ops), f64 gradient checks, and argument errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/reduce/reduce.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tensors.h"

using engine::DType;
using engine::Shape;
using engine::Tensor;
using test::f64;

namespace {

// x[i][j][k] = 1 + 4i + 2j + k: the numbers 1..8 in a [2, 2, 2] tensor.
Tensor one_to_eight() { return f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}); }

}  // namespace

TEST_CASE("sum kernel: middle axis of [outer, reduce, inner], scaled", "[sum]") {
  // x viewed as [2, 3, 2]; out[o][i] = 0.5 * sum_r x[o][r][i].
  std::vector<double> x{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, out(4, 0.0);
  engine::kernels::sum_axis_cpu<double>(x.data(), 2, 3, 2, 0.5, out.data());
  // o=0: i=0: (1+3+5)/2 = 4.5, i=1: (2+4+6)/2 = 6; o=1: (7+9+11)/2 = 13.5, (8+10+12)/2 = 15.
  REQUIRE(out == std::vector<double>{4.5, 6, 13.5, 15});
}

TEST_CASE("sum kernel: broadcast repeats along stride-0 dims", "[sum]") {
  // src = [1, 2] laid out as a [2, 3] with stride 0 along dim 1, times 2.
  std::vector<double> src{1, 2}, dst(6, 0.0);
  engine::kernels::StridedLayout layout{2, {2, 3}, {1, 0}};
  engine::kernels::broadcast_cpu<double>(src.data(), layout, 2.0, dst.data());
  REQUIRE(dst == std::vector<double>{2, 2, 2, 4, 4, 4});
}

TEST_CASE("sum: all elements and along dims, with keepdim and negative dims", "[sum]") {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor all = engine::sum(x);
  REQUIRE(all.shape() == Shape{});
  REQUIRE(all.item() == 21.0);

  Tensor rows = engine::sum(x, {1});
  REQUIRE(rows.shape() == Shape{2});
  test::require_close(rows, {6, 15}, 0, 0, "sum dim 1");

  Tensor rows_kept = engine::sum(x, {-1}, true);
  REQUIRE(rows_kept.shape() == Shape{2, 1});
  test::require_close(rows_kept, {6, 15}, 0, 0, "sum dim -1 keepdim");

  Tensor cols = engine::sum(x, {-2});
  REQUIRE(cols.shape() == Shape{3});
  test::require_close(cols, {5, 7, 9}, 0, 0, "sum dim -2");

  Tensor both = engine::sum(x, {0, 1}, true);
  REQUIRE(both.shape() == Shape{1, 1});
  REQUIRE(both.item() == 21.0);
}

TEST_CASE("sum: non-adjacent dims {0, 2} of a [2, 2, 2] tensor", "[sum]") {
  // For j = 0: x[0][0][*] + x[1][0][*] = (1 + 2) + (5 + 6) = 14; j = 1: (3 + 4) + (7 + 8) = 22.
  Tensor out = engine::sum(one_to_eight(), {0, 2});
  REQUIRE(out.shape() == Shape{2});
  test::require_close(out, {14, 22}, 0, 0, "sum {0, 2}");
  Tensor kept = engine::sum(one_to_eight(), {2, 0}, true);
  REQUIRE(kept.shape() == Shape{1, 2, 1});
  test::require_close(kept, {14, 22}, 0, 0, "sum {2, 0} keepdim");
}

TEST_CASE("sum: f32 input and an empty dim list (no reduction)", "[sum]") {
  Tensor x = Tensor::from_vector({0.5, 0.25, 0.125}, {3}, DType::F32);
  Tensor s = engine::sum(x);
  REQUIRE(s.dtype() == DType::F32);
  REQUIRE(s.item() == 0.875);
  Tensor same = engine::sum(x, {});
  REQUIRE(same.shape() == Shape{3});
  test::require_close(same, {0.5, 0.25, 0.125}, 0, 0, "sum over no dims");
}

TEST_CASE("mean: all elements and along dims", "[mean]") {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  REQUIRE(engine::mean(x).item() == 3.5);                                          // 21 / 6
  test::require_close(engine::mean(x, {1}), {2, 5}, 0, 0, "mean dim 1");           // 6/3, 15/3
  test::require_close(engine::mean(x, {0}), {2.5, 3.5, 4.5}, 0, 0, "mean dim 0");  // 5/2 ...
  // Over {0, 2} of 1..8: 14 / 4 and 22 / 4.
  Tensor m = engine::mean(one_to_eight(), {0, -1}, true);
  REQUIRE(m.shape() == Shape{1, 2, 1});
  test::require_close(m, {3.5, 5.5}, 0, 0, "mean {0, -1}");
}

TEST_CASE("logsumexp: hand-computed and stable for large inputs", "[logsumexp]") {
  // Row 0: log(e^0 + e^{log 3}) = log 4. Row 1: log(2 e^1000) = 1000 + log 2 (a naive exp
  // would overflow to inf).
  Tensor x = f64({0, std::log(3.0), 1000, 1000}, {2, 2});
  Tensor rows = engine::logsumexp(x, 1);
  REQUIRE(rows.shape() == Shape{2});
  test::require_close(rows, {std::log(4.0), 1000 + std::log(2.0)}, 1e-12, 1e-15, "rows");
  // Columns of [[0, log 3], [1000, 1000]]: log(1 + e^1000) = 1000 + log(1 + e^-1000) ~ 1000, and
  // log(3 + e^1000) ~ 1000, both to double precision.
  Tensor cols = engine::logsumexp(x, -2, true);
  REQUIRE(cols.shape() == Shape{1, 2});
  test::require_close(cols, {1000, 1000}, 1e-12, 1e-15, "cols");
  // f32 with values whose exp overflows float: log(e^100 + e^100) = 100 + log 2.
  Tensor big = Tensor::from_vector({100, 100}, {2}, DType::F32);
  REQUIRE(std::fabs(engine::logsumexp(big, 0).item() - (100 + std::log(2.0))) < 1e-4);
}

TEST_CASE("logsumexp: infinities and NaN as PyTorch", "[logsumexp]") {
  // Rows: all -inf -> -inf; a +inf -> +inf; a NaN beside -inf, beside +inf, alone, or beside
  // finite values -> NaN (a NaN-skipping max made the first two of those -inf and +inf).
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {DType::F64, DType::F32}) {
    Tensor x = Tensor::from_vector({-inf, -inf, 1, inf, nan, -inf, inf, nan, nan, nan, 0, nan},
                                   {6, 2}, dtype);
    const std::vector<double> out = engine::logsumexp(x, 1).to_vector();
    CHECK(out[0] == -inf);
    CHECK(out[1] == inf);
    for (size_t row = 2; row < 6; ++row) {
      INFO(row);
      CHECK(std::isnan(out[row]));
    }
  }
}

TEST_CASE("sum grad: all elements, one dim, non-adjacent dims, keepdim or not", "[sum][grad]") {
  auto all = [](const std::vector<Tensor>& in) { return engine::sum(in[0]); };
  test::require_gradcheck(all, {test::random_leaf({2, 3}, 1)});
  for (bool keepdim : {false, true}) {
    auto last = [keepdim](const std::vector<Tensor>& in) {
      return engine::sum(in[0], {-1}, keepdim);
    };
    test::require_gradcheck(last, {test::random_leaf({2, 3, 4}, 2)});
    auto outer = [keepdim](const std::vector<Tensor>& in) {
      return engine::sum(in[0], {0, 2}, keepdim);
    };
    test::require_gradcheck(outer, {test::random_leaf({2, 3, 2, 2}, 3)});
    auto middle = [keepdim](const std::vector<Tensor>& in) {
      return engine::sum(in[0], {1, 2}, keepdim);
    };
    test::require_gradcheck(middle, {test::random_leaf({2, 3, 2, 2}, 4)});
  }
}

TEST_CASE("mean grad: all elements and along dims, keepdim or not", "[mean][grad]") {
  auto all = [](const std::vector<Tensor>& in) { return engine::mean(in[0]); };
  test::require_gradcheck(all, {test::random_leaf({3, 4}, 5)});
  for (bool keepdim : {false, true}) {
    auto dims = [keepdim](const std::vector<Tensor>& in) {
      return engine::mean(in[0], {0, -1}, keepdim);
    };
    test::require_gradcheck(dims, {test::random_leaf({2, 3, 4}, 6)});
    auto one = [keepdim](const std::vector<Tensor>& in) {
      return engine::mean(in[0], {1}, keepdim);
    };
    test::require_gradcheck(one, {test::random_leaf({2, 3, 4}, 7)});
  }
}

TEST_CASE("logsumexp grad: each dim of [2, 3, 4], keepdim or not", "[logsumexp][grad]") {
  for (int64_t dim : {0, 1, 2, -1}) {
    for (bool keepdim : {false, true}) {
      auto f = [dim, keepdim](const std::vector<Tensor>& in) {
        return engine::logsumexp(in[0], dim, keepdim);
      };
      test::require_gradcheck(f, {test::random_leaf({2, 3, 4}, 8, -3.0, 3.0)});
    }
  }
}

TEST_CASE("sum errors: dims out of range, repeated dims, integer input", "[sum][mean]") {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  REQUIRE_THROWS_WITH(engine::sum(x, {2}), Catch::Contains("sum"));
  REQUIRE_THROWS_WITH(engine::sum(x, {-3}), Catch::Contains("sum"));
  REQUIRE_THROWS_WITH(engine::sum(x, {1, -1}), Catch::Contains("sum") && Catch::Contains("twice"));
  REQUIRE_THROWS_WITH(engine::mean(x, {5}), Catch::Contains("mean"));
  REQUIRE_THROWS_WITH(engine::sum(Tensor::from_indices({1, 2}, {2})), Catch::Contains("sum"));
  REQUIRE_THROWS_WITH(engine::logsumexp(x, 2), Catch::Contains("logsumexp"));
  REQUIRE_THROWS_WITH(engine::logsumexp(Tensor::zeros({2, 0}, DType::F64), 1),
                      Catch::Contains("logsumexp"));
}
