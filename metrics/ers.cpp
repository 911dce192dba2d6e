// The Empirical Robustness Score (header: metrics/ers.h).
#include "metrics/ers.h"

namespace metrics {

const std::array<std::string, kErsColumns>& ers_column_names() {
  static const std::array<std::string, kErsColumns> names = {"CA+",  "CA-",  "QA+", "QA-", "TMA",
                                                             "ES:D", "ES:R", "LTM", "GTM", "GTT"};
  return names;
}

ErsRow ers_normalized(const ErsRow& raw) {
  return {2.0 * raw[0],                  // CA+: 50 % (unmoved) -> 100
          100.0 - raw[1],                // CA-
          2.0 * raw[2],                  // QA+
          100.0 - raw[3],                // QA-
          100.0 * (1.0 - raw[4]),        // TMA cosine
          100.0 * (2.0 - raw[5]) / 2.0,  // ES:D distance
          raw[6],                        // ES:R recall@1 %
          raw[7],                        // LTM recall@1 %
          raw[8],                        // GTM recall@1 %
          raw[9]};                       // GTT retain@4 %
}

double empirical_robustness_score(const ErsRow& raw) {
  const ErsRow normalized = ers_normalized(raw);
  double total = 0.0;
  for (double value : normalized) total += value;
  return total / kErsColumns;
}

}  // namespace metrics
