// The worst case per query over the attacks of a profile and over random restarts (docs/attacks.md,
// "Worst case per query"; issue 38): an AutoAttack-style report for ranking attacks.
//
// Every attack of a profile perturbs image i of the split (as candidate for CA, as query for the
// others) and reports one value per image and measure (attacks/measures.h). A judged measure
// has a break rule: the value an attack leaves for image i either is beyond the rule's threshold
// (the attack "moved image i beyond the threshold": the image is broken) or is not.
//
//   measure                          broken when              why this threshold
//   CA+:prank QA+:prank SPQA+:prank  v <  1 (%)               the candidate entered the query's
//                                                             top 1 %, the set the paper calls
//                                                             the query's neighbours (CA-, QA-
//                                                             draw from it)
//   CA-:prank QA-:prank SPQA-:prank  v >= 50 (%)              the top-1 % candidate now ranks
//                                                             behind half the gallery: no better
//                                                             than a random item
//   TMA:cosine                       v >= 0.5                 the ERS term 100 (1 - v) < 50
//   ES:D                             v >= 1                   the ERS term 100 (2 - v) / 2 < 50
//   *:r@1, ES:R, GTT:retain@4        v <  50 (per image 0     the top-1 retrieval is lost (or the
//                                    or 100 %)                clean top-1 left the top 4)
// Others (SPQA:GTprank, STAX/MTAX:sqdist, GTT:retain@1) are reported but not judged. A query the
// clean model already gets "wrong" (a clean top-1 of another class, a random CA+ candidate
// already in the top 1 %) counts as broken, as a misclassified image does in robust accuracy.
//
// Restarts: restart 0 is the profile's own run (its spec as written, usually without a random
// start); restarts r = 1..R run the same spec with rinit=1, each from its own random start. The
// selection (queries, candidates, targets) is the same in every restart: restart r's start seed
// is derived from the batch's generator without drawing from it (restart_pgd_options), so only
// the start differs and image i's worst value over restarts compares like with like.
//
// "Worst" is per image and measure the value most favourable to the attacker (the lowest for
// "lower is broken", the highest otherwise). The robust fraction of a set of judged measures is
// the fraction of images that none of them broke.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attacks/attack.h"
#include "attacks/pgd.h"
#include "engine/random.h"

namespace attacks {

// The thresholds of the table above.
struct BreakThresholds {
  double raise_percentile = 1.0;   // CA+, QA+, SP-QA+: broken below (percent)
  double lower_percentile = 50.0;  // CA-, QA-, SP-QA-: broken at or above (percent)
  double cosine = 0.5;             // TMA: broken at or above
  double shift = 1.0;              // ES:D: broken at or above
  double hit = 50.0;               // recall@1 / retain@4 (0 or 100 per image): broken below
};

struct BreakRule {
  bool broken_below = true;  // true: v < threshold breaks (the attacker lowers v); false: v >= it
  double threshold = 0.0;
};
// The rule of a measure name (e.g. "QA-:prank"), or none when the measure is not judged.
std::optional<BreakRule> break_rule(const std::string& measure, const BreakThresholds& thresholds);
bool is_broken(const BreakRule& rule, double value);
// The value more favourable to the attacker; a NaN (not yet measured) loses to any number.
double worse_for_defender(const BreakRule& rule, double a, double b);

// "rank" (CA, QA, SPQA), "embedding" (TMA, ES, STAX, MTAX) or "top-1" (LTM, GTM, GTT), from an
// attack label such as "QA-" (attacks/attack_kinds.h's three families).
std::string attack_family(const std::string& label);

// Restart r >= 1 of one batch: `pgd` with a random start whose seed is the one rinit=1 would draw
// from `gen`, mixed with r as attack_stream_seed mixes a label: reproducible, and independent
// across restarts, batches and attacks. `gen` moves on exactly as in restart 0 (by the one block
// seeded() takes when `pgd` itself has a random start, else not at all: a copy draws), so later
// batches select what restart 0 selected.
PgdOptions restart_pgd_options(const PgdOptions& pgd, engine::Generator& gen, int64_t restart);

// Per image, per judged measure of every attack: the value of restart 0 and the worst over
// restarts 1..R so far (NaN where not yet measured).
struct WorstCaseMeasure {
  std::string attack;   // canonical spec string of restart 0's spec
  std::string label;    // attack_label, e.g. "QA-"
  std::string measure;  // e.g. "QA-:prank"
  BreakRule rule;
  std::vector<double> single;    // restart 0, one value per image
  std::vector<double> restarts;  // worst over restarts 1..R
  int64_t restarts_done = 0;     // restarts whose every image has been added
};

struct RobustFractions {
  double single = 0.0;    // images no judged measure of restart 0 broke
  double restarts = 0.0;  // ... of the worst over restarts 1..R
  double worst = 0.0;     // ... of the worst over restart 0 and restarts 1..R
};

class WorstCaseTable {
 public:
  explicit WorstCaseTable(int64_t images, BreakThresholds thresholds = {});

  // Adds restart `restart`'s per-image values (attack_batch's adversarial measures) of images
  // [first_image, first_image + B) for the attack whose restart-0 spec string is `attack`.
  // Unjudged measures are ignored.
  void add(const std::string& attack, const std::string& label, int64_t restart,
           int64_t first_image, const Measures& adversarial);
  // Marks restart `restart` of `attack` finished (restarts_done = max(done, restart)).
  void finish_restart(const std::string& attack, int64_t restart);

  const std::vector<WorstCaseMeasure>& measures() const { return measures_; }
  std::vector<WorstCaseMeasure>& measures() { return measures_; }
  int64_t images() const { return images_; }
  const BreakThresholds& thresholds() const { return thresholds_; }
  // Restarts every measure of `attack` has finished (0 when the attack has no entry).
  int64_t restarts_done(const std::string& attack) const;
  bool has_attack(const std::string& attack) const;

  // The robust fractions over the measures `over` (an image no measure of `over` broke is robust;
  // one not yet measured is not broken).
  RobustFractions robust_fractions(const std::vector<const WorstCaseMeasure*>& over) const;
  // The measures of one attack (its spec string), of one family ("rank", "embedding", "top-1"),
  // or all of them ("").
  std::vector<const WorstCaseMeasure*> select(const std::string& attack_or_family = "") const;
  // The mean over images of a measure's worst value (restart 0's where no restart ran).
  static double worst_mean(const WorstCaseMeasure& m);
  static double single_mean(const WorstCaseMeasure& m);

 private:
  WorstCaseMeasure& entry(const std::string& attack, const std::string& label,
                          const std::string& measure, const BreakRule& rule);
  int64_t images_;
  BreakThresholds thresholds_;
  std::vector<WorstCaseMeasure> measures_;
};

}  // namespace attacks
