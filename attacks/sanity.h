// Sanity checks that flag a robustness evaluation not to be trusted (docs/attacks.md, "Sanity
// checks"; issue 38; the gradient-masking checklist of the classification field). Each check is
// one function of numbers the caller measured, returning a verdict; the thresholds are below with
// their reasons. Robustness here is a robust fraction (attacks/worst_case.h): the share of images
// no attack moved beyond its threshold, in [0, 1]; lower means a stronger attack.
//
//   (a) check_epsilon_one_breaks: at eps = 1 the L_inf ball holds every image, so a working
//       gradient attack breaks (nearly) every image. An attack leaving more than
//       kEpsilonOneMaxRobust of them intact is not following a gradient (masked, obfuscated, or
//       a bug).
//   (b) check_more_effort_not_weaker: more effort (random restarts, more steps) can only find more;
//       a robust fraction that rises with effort by more than kMoreEffortTolerance means the
//       optimizer, not the model, decides the number.
//   (c) a black-box (query) or transfer attack has less information than the white-box one; if it
//       is stronger, the white-box gradients are masked. One definition, on the attack's measures:
//       attacks/whitebox_comparison.h (gradient_masking_suspected), which `dml attack` applies to
//       its NES and transfer runs; `dml ers` runs neither and reports (c) as not run.
//   (d) check_not_collapsed: embeddings that carry no class structure (NMI below kCollapsedNmi,
//       or pi_ratio undefined or >= kCollapsedPiRatio: the classes' spread as wide as the
//       distances between their centres) make several ERS columns look robust for free (an
//       embedding that does not move has ES:D = 0 and TMA unchanged; HM §5 warns of this).
#pragma once

#include <string>

namespace attacks {

// (a) 10 %: a few short-run images and subset noise allowed; a masked model keeps its clean
// robustness (typically far above this) at any eps.
constexpr double kEpsilonOneMaxRobust = 0.10;
// (b) 2 percentage points: the noise of a robust fraction over a few hundred images
// (one image in 50), so only a real reversal is flagged.
constexpr double kMoreEffortTolerance = 0.02;
// (d) NMI 0.1: a trained Fashion-MNIST model scores 0.5 and more, a labelling unrelated to the
// classes about 0. pi_ratio 1: classes spread as far as their centres lie apart.
constexpr double kCollapsedNmi = 0.10;
constexpr double kCollapsedPiRatio = 1.0;

struct SanityVerdict {
  bool checked = false;  // false: not run (its inputs missing); `passed` means nothing then
  bool passed = true;
  std::string detail;  // one line: the numbers compared and the threshold
};

struct SanityReport {
  SanityVerdict epsilon_one;  // (a)
  SanityVerdict more_effort;  // (b)
  SanityVerdict blackbox;     // (c)
  SanityVerdict collapse;     // (d)
  bool trusted() const;       // every checked verdict passed
};

// (a) robust fraction at eps = 1 of a profile's attacks together (an image survives when no
// attack broke it; one attack alone, e.g. GTM with its nearest other-class target, need not break
// every image).
SanityVerdict check_epsilon_one_breaks(double robust_at_eps_one,
                                       double max_robust = kEpsilonOneMaxRobust);
// (b) robust fraction of the single run and of the run with more effort (worst over restarts, or
// more steps), on the same images.
SanityVerdict check_more_effort_not_weaker(double single_robust, double more_effort_robust,
                                           double tolerance = kMoreEffortTolerance);
// (d) NMI of k-means on the clean embeddings and their pi_ratio (metrics/spread.h; NaN when
// undefined, e.g. all class means equal).
SanityVerdict check_not_collapsed(double nmi, double pi_ratio, double min_nmi = kCollapsedNmi,
                                  double max_pi_ratio = kCollapsedPiRatio);

}  // namespace attacks
