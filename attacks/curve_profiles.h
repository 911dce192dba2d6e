// The attack-strength curves of every ERS attack (issue 38; Zhou et al. TPAMI §6.1.3 and Fig. 6,
// which draws them for CA and SP-QA only): `dml ers --profile curve28 | curve224`.
//
// Each of the nine ERS attacks (CA+, CA-, QA+, QA-, TMA, ES, LTM, GTM, GTT; W = M = 1 as rob28) is
// run at every point of two sweeps:
//
//   eps sweep    32 steps at eps = k/255 for
//                  curve28:  k = 0, 7, 14, ..., 77 (qccurve28's budgets) and 102, 153, 204, 255
//                  curve224: k = 0, 1, 2, 4, 8, 16, 32, 64, 128, 255
//   steps sweep  eta = 1, 8, 32, 64, 128 steps at the profile's eps (77/255; curve224 8/255)
//
// Step size: alpha(eps, eta) = max(1, round(k * 32 / (25 eta))) / 255, the paper's rule
// alpha = max(1/255, round(eps 255 / 25) / 255) (§6.1.3) rescaled so that every eta travels about
// the same 1.28 eps in total: at eta = 32 it is the paper's rule itself, and a fixed alpha would
// let eta = 8 steps of 3/255 reach only 24/255 of a 77/255 budget (fewer steps would then look
// weaker for lack of reach, not of iterations). eta = 1 is FGSM: the PGD engine steps by eps, and
// the spec says alpha = eps.
//
// The point at (the profile's eps, 32 steps) belongs to both sweeps and is run once.
#pragma once

#include <string>
#include <vector>

namespace attacks {

struct CurvePoint {
  std::string sweep;  // "eps" or "steps"
  std::string spec;   // the attack's spec string, e.g. "CA:pm=+:W=1:eps=0.027451:alpha=..."
  int eps_255 = 0;    // eps = eps_255 / 255
  int alpha_255 = 0;  // alpha = alpha_255 / 255
  int steps = 0;
};

// True for "curve28" and "curve224".
bool is_curve_profile(const std::string& profile);

// Every point of a curve profile: the eps sweep (eps ascending, the nine attacks in ERS order at
// each), then the steps sweep (eta ascending, same attack order). Throws engine::Error for a
// profile that is not a curve profile.
std::vector<CurvePoint> curve_points(const std::string& profile);

// The distinct spec strings of curve_points() in order: what `dml ers` runs.
std::vector<std::string> curve_specs(const std::string& profile);

// alpha in 1/255 for a budget of eps_255 / 255 and `steps` steps (the rule above).
int curve_alpha_255(int eps_255, int steps);

}  // namespace attacks
