// The gradient-masking check of the black-box and transfer attacks (docs/attacks.md "Black-box and
// transfer attacks"): a gradient attack on a model sees the model's own gradient, so it should be
// at least as strong as an attack that only estimates it (NES) or borrows another model's
// (transfer). When one of those beats the white-box attack on the same spec, same images and same
// selection, the white-box gradient is suspect — masked or obfuscated (a quantizing or otherwise
// non-differentiable input layer, a saturated loss) — and the white-box robustness overstated.
// (issue 38; sanity check (c) of attacks/sanity.h, docs/attacks.md "Sanity checks".)
#pragma once

#include <string>
#include <vector>

namespace attacks {

// +1 when a larger adversarial value of `measure` means a stronger attack (CA-:prank, QA-:prank,
// TMA:cosine, ES:D), -1 when a smaller one does (CA+:prank, QA+:prank, the recalls r@1 and ES:R,
// GTT's retain@k, sqdist), 0 for a measure that is no attack strength (SP-QA's GTprank).
int attack_strength_direction(const std::string& measure);

struct StrengthComparison {
  std::string measure;
  double whitebox = 0.0;  // adversarial mean of the white-box attack
  double other = 0.0;     // adversarial mean of the black-box or transfer attack
  bool other_stronger = false;
};

// Per measure, whether `other` beats the white-box value by more than the tolerance: 1 percentage
// point for the percent measures (prank, r@1, ES:R, retain@k), 0.01 for the others (cosine, ES:D,
// sqdist) — the run-to-run noise of a mean over a few hundred images is well below either.
std::vector<StrengthComparison> compare_with_whitebox(const std::vector<std::string>& measures,
                                                      const std::vector<double>& whitebox,
                                                      const std::vector<double>& other);

// Whether any compared measure has other_stronger: the evaluation is suspect.
bool gradient_masking_suspected(const std::vector<StrengthComparison>& comparisons);

}  // namespace attacks
