// `dml ers --worst-case R`: beside the profile's own results, the worst case per image over the
// profile's attacks and R random restarts, its robust fractions (attacks/worst_case.h), and the
// sanity checks of attacks/sanity.h (docs/attacks.md, "Worst case per query", "Sanity checks").
//
// JSON (only with --worst-case; a run without it writes exactly what it wrote before):
//   "worst_case": {"restarts", "thresholds", "robust_fraction" {single, restarts, worst},
//                  "families" {rank|embedding|top-1: {...}}, "ers_worst" (rob28/rob224, once
//                  complete), "attacks": [{"attack", "restarts_done", "robust_fraction",
//                  "measures": {name: {"single_mean", "worst_mean", "single": [per image],
//                  "restarts": [per image worst over restarts 1..R]}}}]}
//   "sanity": {"trusted", "epsilon_one", "more_effort", "blackbox", "collapse"}
// Resumable as ERS: the per-image values are in the file, rewritten after every restart.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attacks/sanity.h"
#include "attacks/worst_case.h"
#include "tools/dml/args.h"
#include "tools/dml/attack_setup.h"

namespace dml {

extern const char kWorstCaseUsage[];

struct WorstCaseOptions {
  int64_t restarts = 0;        // --worst-case R (0: off)
  int64_t sanity_images = 64;  // --sanity-images N: images of the eps = 1 check
  bool enabled() const { return restarts > 0; }
};
WorstCaseOptions take_worst_case_options(Args& args);

// The collapse check (d) on the gallery's clean embeddings: k-means NMI and pi_ratio. Over
// several MPI ranks rank 0 computes them and broadcasts them; every rank takes part.
attacks::SanityVerdict check_gallery_not_collapsed(const attacks::Gallery& gallery, uint64_t seed,
                                                   double* nmi = nullptr,
                                                   double* pi_ratio = nullptr);

class ErsWorstCase {
 public:
  ErsWorstCase(const WorstCaseOptions& options, int64_t images);

  // The per-image values so far. --resume fills it from the previous --out file
  // (read_ers_resume, tools/dml/result_json.h, which also refuses a file written without
  // --worst-case or with another R).
  attacks::WorstCaseTable& table() { return table_; }

  // The profile's own run of `spec` (restart 0): `settings` with a hook that keeps its per-image
  // values.
  AttackRunSettings single_run_settings(const AttackRunSettings& settings,
                                        const attacks::AttackSpec& spec);
  // Restarts 1..R of `spec` not yet done, calling `save` after each.
  void run_restarts(AttackSetup& setup, const attacks::AttackSpec& spec,
                    const std::function<void()>& save);
  // Checks (a), (b) and (d) after the last attack; (c) is reported as not run.
  void run_sanity(AttackSetup& setup, const std::vector<attacks::AttackSpec>& specs);

  nlohmann::ordered_json worst_case_json(bool is_ers_complete) const;
  nlohmann::ordered_json sanity_json() const;
  void print(bool is_ers_complete) const;

 private:
  WorstCaseOptions options_;
  attacks::WorstCaseTable table_;
  attacks::SanityReport sanity_;
  std::vector<std::pair<std::string, double>> epsilon_one_robust_;  // label, robust fraction
  int64_t epsilon_one_images_ = 0;
  double nmi_ = 0.0, pi_ratio_ = 0.0;
  bool sanity_done_ = false;
};

}  // namespace dml
