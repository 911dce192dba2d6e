// Initialization: PyTorch's defaults (bounds and statistics), determinism under a seed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/nn/nn.h"

using engine::Tensor;
namespace nn = engine::nn;

namespace {

struct Stats {
  double mean = 0, variance = 0, max_abs = 0;
};

Stats stats_of(const Tensor& t) {
  std::vector<double> v = t.to_vector();
  Stats s;
  for (double x : v) s.mean += x;
  s.mean /= double(v.size());
  for (double x : v) {
    s.variance += (x - s.mean) * (x - s.mean);
    s.max_abs = std::max(s.max_abs, std::fabs(x));
  }
  s.variance /= double(v.size());
  return s;
}

// U(-b, b) has mean 0 and variance b^2 / 3; with n samples the sample mean has standard
// deviation b / sqrt(3n) and the sample variance a relative deviation of about sqrt(0.8 / n).
void require_uniform(const Tensor& t, double bound) {
  Stats s = stats_of(t);
  double n = double(t.numel());
  INFO("bound " << bound << ", mean " << s.mean << ", variance " << s.variance << ", max |x| "
                << s.max_abs << ", n " << n);
  REQUIRE(s.max_abs <= bound);
  REQUIRE(s.max_abs > bound * (1.0 - 10.0 / n));  // the largest of n draws is this close
  REQUIRE(std::fabs(s.mean) < 5.0 * bound / std::sqrt(3.0 * n));
  REQUIRE(std::fabs(s.variance / (bound * bound / 3.0) - 1.0) < 5.0 * std::sqrt(0.8 / n));
}

}  // namespace

TEST_CASE("init: Linear weight and bias are U(-1/sqrt(fan_in), 1/sqrt(fan_in))", "[init]") {
  engine::Generator gen(42);
  nn::Linear linear(100, 300, true, gen);
  // kaiming_uniform(a = sqrt(5)): sqrt(2 / 6) * sqrt(3 / 100) = 1 / sqrt(100) = 0.1.
  require_uniform(linear.weight(), 0.1);
  require_uniform(linear.bias(), 0.1);
}

TEST_CASE("init: Conv2d fan_in is C * R * S", "[init]") {
  engine::Generator gen(43);
  nn::Conv2d conv(3, 200, 3, 1, 1, 1, true, gen);
  require_uniform(conv.weight(), 1.0 / std::sqrt(27.0));
  require_uniform(conv.bias(), 1.0 / std::sqrt(27.0));
  CHECK(nn::init::fan_in(conv.weight()) == 27);
}

TEST_CASE("init: kaiming_uniform with a = 0 has bound sqrt(6 / fan_in)", "[init]") {
  engine::Generator gen(44);
  Tensor w = Tensor::empty({400, 50});
  nn::init::kaiming_uniform_(w, 0.0, gen);
  require_uniform(w, std::sqrt(6.0 / 50.0));
}

TEST_CASE("init: a seed fixes the weights", "[init]") {
  engine::Generator a(7), b(7), c(8);
  nn::Linear first(4, 4, true, a), second(4, 4, true, b), third(4, 4, true, c);
  CHECK(first.weight().to_vector() == second.weight().to_vector());
  CHECK(first.bias().to_vector() == second.bias().to_vector());
  CHECK(first.weight().to_vector() != third.weight().to_vector());
  // The default generator is used when none is given, and manual_seed resets it.
  engine::manual_seed(3);
  nn::Linear d(4, 4);
  engine::manual_seed(3);
  nn::Linear e(4, 4);
  CHECK(d.weight().to_vector() == e.weight().to_vector());
}

TEST_CASE("init: fan_in needs a weight of rank >= 2", "[init]") {
  REQUIRE_THROWS_WITH(nn::init::fan_in(Tensor::zeros({3})), Catch::Contains("fan_in"));
}
