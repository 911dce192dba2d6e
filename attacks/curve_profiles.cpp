// Attack-strength curve profiles (header: attacks/curve_profiles.h).
#include "attacks/curve_profiles.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/common/check.h"

namespace attacks {
namespace {

// The nine ERS attacks in the papers' column order (as rob28; ES fills two columns).
const std::vector<std::string>& ers_attack_prefixes() {
  static const std::vector<std::string> prefixes = {
      "CA:pm=+:W=1", "CA:pm=-:W=1", "QA:pm=+:M=1", "QA:pm=-:M=1", "TMA", "ES", "LTM", "GTM", "GTT"};
  return prefixes;
}

struct CurveGrid {
  std::vector<int> eps_255;  // the eps sweep, at kEpsSweepSteps steps
  int profile_eps_255;       // the budget of the steps sweep
};

constexpr int kEpsSweepSteps = 32;
const std::vector<int> kStepsSweep = {1, 8, 32, 64, 128};

CurveGrid curve_grid(const std::string& profile) {
  if (profile == "curve28") {
    return {{0, 7, 14, 21, 28, 35, 42, 49, 56, 63, 70, 77, 102, 153, 204, 255}, 77};
  }
  if (profile == "curve224") return {{0, 1, 2, 4, 8, 16, 32, 64, 128, 255}, 8};
  engine::fail("'", profile, "' is not an attack-strength curve profile (curve28, curve224)");
}

CurvePoint make_point(const std::string& sweep, const std::string& prefix, int eps_255, int steps) {
  CurvePoint point;
  point.sweep = sweep;
  point.eps_255 = eps_255;
  point.alpha_255 = curve_alpha_255(eps_255, steps);
  point.steps = steps;
  char budget[96];
  std::snprintf(budget, sizeof budget, ":eps=%.6f:alpha=%.6f:pgditer=%d", eps_255 / 255.0,
                point.alpha_255 / 255.0, steps);
  point.spec = prefix + budget;
  return point;
}

}  // namespace

bool is_curve_profile(const std::string& profile) {
  return profile == "curve28" || profile == "curve224";
}

int curve_alpha_255(int eps_255, int steps) {
  ENGINE_CHECK(steps >= 1 && eps_255 >= 0, "curve_alpha_255: steps ", steps, ", eps ", eps_255);
  if (steps == 1) return eps_255;  // FGSM: pgd_attack steps by eps whatever alpha says
  const double scaled = std::nearbyint(eps_255 * 32.0 / (25.0 * steps));
  return std::max(1, static_cast<int>(scaled));
}

std::vector<CurvePoint> curve_points(const std::string& profile) {
  const CurveGrid grid = curve_grid(profile);
  std::vector<CurvePoint> points;
  for (int eps_255 : grid.eps_255) {
    for (const std::string& prefix : ers_attack_prefixes()) {
      points.push_back(make_point("eps", prefix, eps_255, kEpsSweepSteps));
    }
  }
  for (int steps : kStepsSweep) {
    for (const std::string& prefix : ers_attack_prefixes()) {
      points.push_back(make_point("steps", prefix, grid.profile_eps_255, steps));
    }
  }
  return points;
}

std::vector<std::string> curve_specs(const std::string& profile) {
  std::vector<std::string> specs;
  for (const CurvePoint& point : curve_points(profile)) {
    if (std::find(specs.begin(), specs.end(), point.spec) == specs.end()) {
      specs.push_back(point.spec);
    }
  }
  return specs;
}

}  // namespace attacks
