// The "curve" section of a `dml ers --profile curve28|curve224` result (attacks/curve_profiles.h;
// docs/attacks.md, "Attack-strength curves"): one entry per curve point and ERS column.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/dml/attack_runner.h"

namespace dml {

// For every point of the profile whose attack is among `finished` (matched by canonical spec, after
// complete_spec for `dataset`), and every ERS column that attack fills (metrics/ers.h; ES fills
// ES:D and ES:R): {"sweep", "column", "eps", "eps_255", "alpha", "alpha_255", "steps", "spec",
// "measure", "clean", "raw", "score"}. raw is the measure's mean over the attacked images (the
// column's raw score), score the column's normalized value (higher = more robust, 0-100).
nlohmann::ordered_json curve_results_json(const std::string& profile, const std::string& dataset,
                                          const std::vector<AttackSummary>& finished);

// The points as two tables on stdout: the eps sweep (one row per eps, one score column per ERS
// column) and the steps sweep (one row per eta).
void print_curve_tables(const nlohmann::ordered_json& curve);

}  // namespace dml
