// The Empirical Robustness Score (Zhou et al. TPAMI §5 and §6.1.4; robrank tools/pjswipe.py): ten
// attack results, each normalized to "higher = more robust" on a 0-100 scale, then averaged.
//
//   column  raw score z (what the attack reports)        normalized
//   CA+     rank percentile of the candidate, %          2 z          (50 % = unmoved)
//   CA-     rank percentile of the candidate, %          100 - z
//   QA+     rank percentile of the candidate, %          2 z
//   QA-     rank percentile of the candidate, %          100 - z
//   TMA     cosine(q~, target) after the attack          100 (1 - z)
//   ES:D    embedding shift distance d(q~, q)            100 (2 - z) / 2   (unit sphere: d <= 2)
//   ES:R    recall@1 after the ES attack, %              z
//   LTM     recall@1 after LTM, %                        z
//   GTM     recall@1 after GTM, %                        z
//   GTT     top-1 retained within the top-4, %           z
//
//   ERS = mean of the ten normalized values; the papers print it with one decimal. Nothing is
//   clipped (robrank does not clip either: metric E's ES:D > 2 gives a negative term).
#pragma once

#include <array>
#include <string>

namespace metrics {

constexpr int kErsColumns = 10;
using ErsRow = std::array<double, kErsColumns>;

// "CA+", "CA-", "QA+", "QA-", "TMA", "ES:D", "ES:R", "LTM", "GTM", "GTT" (the papers' order).
const std::array<std::string, kErsColumns>& ers_column_names();

// The normalized value of each column (the table above).
ErsRow ers_normalized(const ErsRow& raw);

// The mean of ers_normalized(raw).
double empirical_robustness_score(const ErsRow& raw);

}  // namespace metrics
