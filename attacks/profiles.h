// Named sets of attacks (robrank's `swipe` profiles, robrank cmdline.py).
//
//   rob28   the ERS attacks for 28x28 models: eps = 77/255 (0.30196), alpha = 3/255 (0.011764),
//           32 PGD steps; CA+/- with W = 1, plain QA+/- with M = 1 (not SP-QA), TMA, ES, LTM, GTM,
//           GTT. ES yields two ERS columns (ES:D and ES:R), so nine attacks fill the ten columns.
//   rob224  the same for 224x224 models with eps = 8/255 (0.03137), alpha = 3/255, 32 steps.
//   rob224-paper  rob224 with the step of Zhou et al. TPAMI §6.1.3, alpha = max(1/255,
//           round(eps 255 / 25) / 255) = 1/255 at eps = 8/255 (rob224 keeps robrank's 3/255).
//   qccurve28  the attack-strength curve of Zhou et al. TPAMI, Fig. 6: CA+, CA-, SP-QA+, SP-QA-
//           (W = M = 1) for eps = 7i/255, i = 0..11, 32 steps of alpha = max(1, round(7i/25))/255
//           (Zhou et al. TPAMI §6.1.3; robrank's profile_qccurve28; 3/255 only from eps = 63/255).
//   curve28, curve224  every ERS attack over an eps sweep and a steps sweep
//   (attacks/curve_profiles.h).
//   table1-28  the attack cells of Zhou et al. TPAMI Tab. 1 for 28x28 models: CA+ and CA- with
//           w = 1, 2, 5, 10 queries, SP-QA+ and SP-QA- with m = 1, 2, 5, 10 candidates, each at
//           eps = 8/255 and 77/255 with 32 steps of the paper's alpha (1/255 and 3/255, §6.1.3):
//           32 attacks (tools/dml/table1_results.h arranges them as the table).
#pragma once

#include <array>
#include <string>
#include <vector>

namespace attacks {

// The spec strings of a profile, in order; throws engine::Error for an unknown profile.
std::vector<std::string> profile_specs(const std::string& profile);
std::vector<std::string> profile_names();
// Whether the profile fills the ten ERS columns (rob28, rob224, rob224-paper).
bool is_ers_profile(const std::string& profile);
// Whether the profile is the Tab. 1 grid (table1-28).
bool is_table1_profile(const std::string& profile);
// That grid: its budgets in 1/255, and its columns, w queries for CA and m candidates for SP-QA.
inline constexpr std::array<int, 2> kTable1Eps255 = {8, 77};
inline constexpr std::array<int, 4> kTable1Counts = {1, 2, 5, 10};

// For each ERS column (metrics::ers_column_names order): the attack label and measure name that
// fill it, e.g. {"CA+", "CA+:prank"}, {"ES", "ES:D"}, {"GTT", "GTT:retain@4"}.
struct ErsSource {
  std::string attack;   // attack_label() of the attack
  std::string measure;  // the Measures name in its BatchResult
};
const std::vector<ErsSource>& ers_sources();

}  // namespace attacks
