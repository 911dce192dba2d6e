// Sanity checks of a robustness evaluation (header: attacks/sanity.h).
#include "attacks/sanity.h"

#include <cmath>
#include <cstdio>

namespace attacks {
namespace {

SanityVerdict verdict(bool passed, const char* line) {
  SanityVerdict v;
  v.checked = true;
  v.passed = passed;
  v.detail = line;
  return v;
}

}  // namespace

bool SanityReport::trusted() const {
  for (const SanityVerdict* v : {&epsilon_one, &more_effort, &blackbox, &collapse}) {
    if (v->checked && !v->passed) return false;
  }
  return true;
}

SanityVerdict check_epsilon_one_breaks(double robust_at_eps_one, double max_robust) {
  char line[128];
  std::snprintf(line, sizeof line, "robust fraction at eps = 1: %.4f (at most %.4f expected)",
                robust_at_eps_one, max_robust);
  return verdict(robust_at_eps_one <= max_robust, line);
}

SanityVerdict check_more_effort_not_weaker(double single_robust, double more_effort_robust,
                                           double tolerance) {
  char line[128];
  std::snprintf(line, sizeof line,
                "robust fraction single run %.4f, with more effort %.4f (tolerance %.4f)",
                single_robust, more_effort_robust, tolerance);
  return verdict(more_effort_robust <= single_robust + tolerance, line);
}

SanityVerdict check_not_collapsed(double nmi, double pi_ratio, double min_nmi,
                                  double max_pi_ratio) {
  const bool passed =
      !std::isnan(nmi) && nmi >= min_nmi && std::isfinite(pi_ratio) && pi_ratio < max_pi_ratio;
  char line[160];
  std::snprintf(line, sizeof line,
                "NMI %.4f (at least %.2f expected), pi_ratio %.4f (below %.2f expected; nan = "
                "undefined)",
                nmi, min_nmi, pi_ratio, max_pi_ratio);
  return verdict(passed, line);
}

}  // namespace attacks
