// The "table1" section of a `dml ers --profile table1-28` result (attacks/profiles.h): the 32
// attacks arranged as the attack cells of Zhou et al. TPAMI Tab. 1, one row per eps and attack
// (CA+, CA-, SP-QA+, SP-QA-), one column per w (CA's queries) or m (SP-QA's candidates).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "tools/dml/attack_runner.h"

namespace dml {

// One entry per eps (ascending) and attack (CA+, CA-, SP-QA+, SP-QA-), for the attacks among
// `finished` that belong to Tab. 1's grid: {"eps_255", "attack", "counts" ([1, 2, 5, 10], w or m),
// "clean", "adversarial"} with the rank percentile (%) at each count, null where that attack has
// not run; SP-QA rows also "gt_worst", R^_GT: the worst (highest) rank percentile of the
// semantic-preserving references over the four m (the paper's Tab. 1 caption), null until all
// four have run.
nlohmann::ordered_json table1_results_json(const std::vector<AttackSummary>& finished);

// The entries as Tab. 1's rows on stdout: the adversarial percentiles, "-" for an attack not run.
void print_table1(const nlohmann::ordered_json& table1);

}  // namespace dml
