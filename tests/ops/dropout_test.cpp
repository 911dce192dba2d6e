// dropout: the mask comes from the Philox uniforms (keep where u >= p), survivors are scaled by
// 1/(1-p), eval and p = 0 are the identity, the backward reuses the forward's mask.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"

using engine::DType;
using engine::Generator;
using engine::Tensor;

TEST_CASE("dropout: hand-computed p = 0.5 keeps exactly the elements whose uniform is >= p",
          "[dropout]") {
  // Every x is 3 and p = 0.5, so each output is 0 (dropped) or 3 / (1 - 0.5) = 6 (kept), and it
  // is kept exactly where the generator's uniform, drawn the same way here, is >= 0.5.
  for (DType dtype : {DType::F64, DType::F32}) {
    Tensor x = Tensor::full({3, 5}, 3.0, dtype);
    Generator gen(42), same(42);
    Tensor y = engine::dropout(x, 0.5, true, gen);
    const std::vector<double> u = engine::uniform({3, 5}, 0.0, 1.0, same, dtype).to_vector();
    const std::vector<double> got = y.to_vector();
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("element " << i << ", u = " << u[i]);
      CHECK(got[i] == (u[i] >= 0.5 ? 6.0 : 0.0));
    }
    // dropout draws exactly the uniforms of one x-shaped tensor.
    CHECK(gen.offset == same.offset);
  }
}

TEST_CASE("dropout: on 100k elements the dropped fraction is near p and survivors scale by 1/(1-p)",
          "[dropout]") {
  const double p = 0.3;
  const int64_t n = 100000;
  Generator gen(2024);
  Tensor y = engine::dropout(Tensor::ones({n}, DType::F64), p, true, gen);
  int64_t dropped = 0, badly_scaled = 0;
  for (double v : y.to_vector()) {
    if (v == 0.0) {
      ++dropped;
    } else if (std::fabs(v - 1.0 / (1.0 - p)) > 1e-15) {
      ++badly_scaled;
    }
  }
  CHECK(badly_scaled == 0);
  // Binomial(n, p): standard deviation of the fraction sqrt(p (1 - p) / n) ~ 0.00145; allow 5.
  const double fraction = double(dropped) / double(n);
  CHECK(std::fabs(fraction - p) < 5.0 * std::sqrt(p * (1.0 - p) / double(n)));
}

TEST_CASE("dropout: the same seed gives the same mask, another seed another", "[dropout]") {
  Tensor x = test::random_leaf({64}, 1).detach();
  Generator a(9), b(9), c(10);
  const std::vector<double> ya = engine::dropout(x, 0.4, true, a).to_vector();
  CHECK(ya == engine::dropout(x, 0.4, true, b).to_vector());
  CHECK(ya != engine::dropout(x, 0.4, true, c).to_vector());
  // The generator advances: a second call on it draws a new mask.
  CHECK(ya != engine::dropout(x, 0.4, true, a).to_vector());
}

TEST_CASE("dropout: f32 and f64 draw the same mask", "[dropout]") {
  // The uniforms are 24-bit multiples of 2^-24, exact in both types, and 0.5 is exact too.
  Generator g32(5), g64(5);
  const std::vector<double> y32 =
      engine::dropout(Tensor::ones({257}, DType::F32), 0.5, true, g32).to_vector();
  const std::vector<double> y64 =
      engine::dropout(Tensor::ones({257}, DType::F64), 0.5, true, g64).to_vector();
  CHECK(y32 == y64);
}

TEST_CASE("dropout: eval mode and p = 0 return x itself and draw nothing", "[dropout]") {
  Tensor x = test::random_leaf({2, 3}, 3);
  Generator gen(1);
  CHECK(engine::dropout(x, 0.5, false, gen).same_as(x));
  CHECK(engine::dropout(x, 0.0, true, gen).same_as(x));
  CHECK(gen.offset == 0);
}

TEST_CASE("dropout: p = 1 drops everything, gradient included", "[dropout]") {
  Tensor x = test::random_leaf({2, 3}, 4);
  Generator gen(1);
  Tensor y = engine::dropout(x, 1.0, true, gen);
  test::require_close(y, std::vector<double>(6, 0.0), 0.0, 0.0, "y");
  std::vector<Tensor> g = engine::grad({y}, {x}, {Tensor::ones({2, 3}, DType::F64)});
  test::require_close(g[0], std::vector<double>(6, 0.0), 0.0, 0.0, "dx");
}

TEST_CASE("dropout grad: the backward multiplies by the forward's mask", "[dropout][grad]") {
  // Re-seeding inside the function keeps the mask fixed across the finite-difference calls.
  Tensor x = test::random_leaf({3, 4}, 5);
  const double p = GENERATE(0.25, 0.6);
  test::require_gradcheck(
      [p](const std::vector<Tensor>& in) {
        Generator gen(77);
        return engine::dropout(in[0], p, true, gen);
      },
      {x});
}

TEST_CASE("dropout grad: the gradient is the upstream gradient times 0 or 1/(1-p)",
          "[dropout][grad]") {
  Tensor x = Tensor::full({40}, 2.0, DType::F64);
  x.set_requires_grad(true);
  Generator gen(8);
  Tensor y = engine::dropout(x, 0.75, true, gen);
  Tensor dy = Tensor::full({40}, 0.5, DType::F64);
  const std::vector<double> dx = engine::grad({y}, {x}, {dy})[0].to_vector();
  const std::vector<double> out = y.to_vector();
  for (size_t i = 0; i < dx.size(); ++i) {
    // Kept: y = 2 * 4 = 8 and dx = 0.5 * 4 = 2; dropped: both 0.
    CHECK(dx[i] == (out[i] == 8.0 ? 2.0 : 0.0));
  }
}

TEST_CASE("dropout: p outside [0, 1] and integer tensors are errors naming the op", "[dropout]") {
  Tensor x = Tensor::ones({4}, DType::F64);
  Generator gen(1);
  using Catch::Contains;
  REQUIRE_THROWS_WITH(engine::dropout(x, -0.1, true, gen), Contains("dropout"));
  REQUIRE_THROWS_WITH(engine::dropout(x, 1.5, true, gen), Contains("dropout"));
  REQUIRE_THROWS_WITH(engine::dropout(x, std::numeric_limits<double>::quiet_NaN(), true, gen),
                      Contains("dropout"));
  REQUIRE_THROWS_WITH(engine::dropout(Tensor::arange(4), 0.5, true, gen), Contains("dropout"));
}
