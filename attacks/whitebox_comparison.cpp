// The gradient-masking check (header: attacks/whitebox_comparison.h).
#include "attacks/whitebox_comparison.h"

#include "kernels/common/check.h"

namespace attacks {

namespace {

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_percent(const std::string& measure) {
  return ends_with(measure, ":prank") || ends_with(measure, ":r@1") || measure == "ES:R" ||
         measure.find(":retain@") != std::string::npos;
}

}  // namespace

int attack_strength_direction(const std::string& measure) {
  if (ends_with(measure, ":GTprank")) return 0;
  // CA- and QA- (and SP-QA-) push a candidate down the ranking: a larger percentile is stronger.
  if (ends_with(measure, "-:prank")) return +1;
  if (ends_with(measure, "+:prank")) return -1;
  if (measure == "TMA:cosine" || measure == "ES:D") return +1;
  if (is_percent(measure) || ends_with(measure, ":sqdist")) return -1;
  engine::fail("attack_strength_direction: unknown measure '", measure, "'");
}

std::vector<StrengthComparison> compare_with_whitebox(const std::vector<std::string>& measures,
                                                      const std::vector<double>& whitebox,
                                                      const std::vector<double>& other) {
  ENGINE_CHECK(whitebox.size() == measures.size() && other.size() == measures.size(),
               "compare_with_whitebox: ", measures.size(), " measures but ", whitebox.size(),
               " white-box and ", other.size(), " other values");
  std::vector<StrengthComparison> out;
  for (size_t m = 0; m < measures.size(); ++m) {
    const int direction = attack_strength_direction(measures[m]);
    if (direction == 0) continue;
    const double tolerance = is_percent(measures[m]) ? 1.0 : 0.01;
    StrengthComparison c;
    c.measure = measures[m];
    c.whitebox = whitebox[m];
    c.other = other[m];
    c.other_stronger = direction * (other[m] - whitebox[m]) > tolerance;
    out.push_back(c);
  }
  return out;
}

bool gradient_masking_suspected(const std::vector<StrengthComparison>& comparisons) {
  for (const StrengthComparison& c : comparisons) {
    if (c.other_stronger) return true;
  }
  return false;
}

}  // namespace attacks
