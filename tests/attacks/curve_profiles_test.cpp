// The attack-strength curve profiles (attacks/curve_profiles.h): their point lists worked by hand
// from the documented grids and step rule alpha = max(1, round(k 32 / (25 eta))) / 255 for eps =
// k/255 and eta steps (eta = 1: alpha = eps, FGSM).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "attacks/attack.h"
#include "attacks/curve_profiles.h"
#include "attacks/profiles.h"
#include "kernels/common/check.h"

namespace {

const std::vector<std::string> kAttackPrefixes = {
    "CA:pm=+:W=1:", "CA:pm=-:W=1:", "QA:pm=+:M=1:", "QA:pm=-:M=1:", "TMA:",
    "ES:",          "LTM:",         "GTM:",         "GTT:"};

}  // namespace

TEST_CASE("curve28's points: 16 budgets at 32 steps and 5 step counts at 77/255, nine attacks",
          "[attacks]") {
  const std::vector<attacks::CurvePoint> points = attacks::curve_points("curve28");
  // eps in 1/255 and, at 32 steps, round(k 32 / 800) = round(k / 25) floored at 1:
  //   k      0 7 14 21 28 35 42 49 56 63 70 77 102 153 204 255
  //   k/25   0 .28 .56 .84 1.12 1.4 1.68 1.96 2.24 2.52 2.8 3.08 4.08 6.12 8.16 10.2
  const int eps_255[16] = {0, 7, 14, 21, 28, 35, 42, 49, 56, 63, 70, 77, 102, 153, 204, 255};
  const int alpha_255[16] = {1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 6, 8, 10};
  // At 77/255: eta 1 -> eps (77); 8 -> round(2464/200 = 12.32) = 12; 32 -> round(3.08) = 3;
  // 64 -> round(1.54) = 2; 128 -> round(0.77) = 1.
  const int steps[5] = {1, 8, 32, 64, 128};
  const int steps_alpha_255[5] = {77, 12, 3, 2, 1};
  REQUIRE(points.size() == (16 + 5) * 9);
  for (size_t i = 0; i < points.size(); ++i) {
    const attacks::CurvePoint& p = points[i];
    INFO(p.spec);
    const size_t row = i / 9;
    CHECK(p.spec.rfind(kAttackPrefixes[i % 9], 0) == 0);
    if (row < 16) {
      CHECK(p.sweep == "eps");
      CHECK(p.eps_255 == eps_255[row]);
      CHECK(p.alpha_255 == alpha_255[row]);
      CHECK(p.steps == 32);
    } else {
      CHECK(p.sweep == "steps");
      CHECK(p.eps_255 == 77);
      CHECK(p.steps == steps[row - 16]);
      CHECK(p.alpha_255 == steps_alpha_255[row - 16]);
    }
    const attacks::AttackSpec spec = attacks::parse_attack_spec(p.spec);
    CHECK(spec.pgd.eps == Approx(p.eps_255 / 255.0).margin(1e-6));
    CHECK(spec.pgd.alpha == Approx(p.alpha_255 / 255.0).margin(1e-6));
    CHECK(spec.pgd.steps == p.steps);
    CHECK_FALSE(spec.pgd.random_start);
  }
  // The point (77/255, 32 steps) is in both sweeps and runs once: 189 points, 180 attacks.
  const std::vector<std::string> specs = attacks::profile_specs("curve28");
  CHECK(specs.size() == 180);
  CHECK(specs == attacks::curve_specs("curve28"));
  CHECK(specs[0] == "CA:pm=+:W=1:eps=0.000000:alpha=0.003922:pgditer=32");
  CHECK(specs.back() == "GTT:eps=0.301961:alpha=0.003922:pgditer=128");
}

TEST_CASE("curve224's points: doubling budgets to 1 and the step counts at 8/255", "[attacks]") {
  const std::vector<attacks::CurvePoint> points = attacks::curve_points("curve224");
  // k = 0 1 2 4 8 16 32 64 128 255; k / 25 rounds to 0 0 0 0 0 1 1 3 5 10, floored at 1.
  const int eps_255[10] = {0, 1, 2, 4, 8, 16, 32, 64, 128, 255};
  const int alpha_255[10] = {1, 1, 1, 1, 1, 1, 1, 3, 5, 10};
  // At 8/255: eta 1 -> 8; 8 -> round(256/200 = 1.28) = 1; 32, 64, 128 -> 1 (floor).
  const int steps[5] = {1, 8, 32, 64, 128};
  const int steps_alpha_255[5] = {8, 1, 1, 1, 1};
  REQUIRE(points.size() == (10 + 5) * 9);
  for (size_t i = 0; i < points.size(); ++i) {
    const attacks::CurvePoint& p = points[i];
    INFO(p.spec);
    const size_t row = i / 9;
    if (row < 10) {
      CHECK(p.eps_255 == eps_255[row]);
      CHECK(p.alpha_255 == alpha_255[row]);
      CHECK(p.steps == 32);
    } else {
      CHECK(p.eps_255 == 8);
      CHECK(p.steps == steps[row - 10]);
      CHECK(p.alpha_255 == steps_alpha_255[row - 10]);
    }
  }
  CHECK(attacks::profile_specs("curve224").size() == 15 * 9 - 9);
}

TEST_CASE(
    "the curve step rule at eta = 32 is the paper's alpha = max(1/255, round(eps 255/25)/255)",
    "[attacks]") {
  for (int k = 0; k <= 255; ++k) {
    INFO(k);
    const int paper = std::max(1, static_cast<int>(std::nearbyint(k / 25.0)));
    CHECK(attacks::curve_alpha_255(k, 32) == paper);
  }
  CHECK(attacks::curve_alpha_255(77, 1) == 77);
  CHECK_FALSE(attacks::is_curve_profile("rob28"));
  CHECK_THROWS_AS(attacks::curve_points("rob28"), engine::Error);
}
