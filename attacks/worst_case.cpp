// The worst case per query (header: attacks/worst_case.h).
#include "attacks/worst_case.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/common/check.h"

namespace attacks {
namespace {

constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// "QA-" of "QA-:prank".
std::string measure_label(const std::string& measure) {
  return measure.substr(0, measure.find(':'));
}

}  // namespace

std::optional<BreakRule> break_rule(const std::string& measure, const BreakThresholds& t) {
  const std::string label = measure_label(measure);
  const bool rank = label == "CA+" || label == "CA-" || label == "QA+" || label == "QA-" ||
                    label == "SPQA+" || label == "SPQA-";
  if (rank && measure == label + ":prank") {
    if (label.back() == '+') return BreakRule{true, t.raise_percentile};
    return BreakRule{false, t.lower_percentile};
  }
  if (measure == "TMA:cosine") return BreakRule{false, t.cosine};
  if (measure == "ES:D") return BreakRule{false, t.shift};
  if (measure == "ES:R" || measure == "GTT:retain@4" || ends_with(measure, ":r@1")) {
    return BreakRule{true, t.hit};
  }
  return std::nullopt;
}

bool is_broken(const BreakRule& rule, double value) {
  if (std::isnan(value)) return false;
  return rule.broken_below ? value < rule.threshold : value >= rule.threshold;
}

double worse_for_defender(const BreakRule& rule, double a, double b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return rule.broken_below ? std::min(a, b) : std::max(a, b);
}

std::string attack_family(const std::string& label) {
  const std::string kind = label.substr(0, label.find_first_of("+-"));
  if (kind == "CA" || kind == "QA" || kind == "SPQA") return "rank";
  if (kind == "LTM" || kind == "GTM" || kind == "GTT") return "top-1";
  return "embedding";
}

PgdOptions restart_pgd_options(const PgdOptions& pgd, engine::Generator& gen, int64_t restart) {
  ENGINE_CHECK(restart >= 1, "restart_pgd_options: restart ", restart, " (restarts count from 1)");
  PgdOptions options = pgd;
  options.random_start = true;
  engine::Generator copy = gen;
  options = seeded(options, pgd.random_start ? gen : copy);
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a of "restart <r>", as attack_stream_seed
  for (const char c : "restart " + std::to_string(restart)) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  }
  options.seed = engine::splitmix64_finalize(options.seed + engine::kGoldenGamma * (hash | 1));
  return options;
}

WorstCaseTable::WorstCaseTable(int64_t images, BreakThresholds thresholds)
    : images_(images), thresholds_(thresholds) {
  ENGINE_CHECK(images > 0, "WorstCaseTable: ", images, " images");
}

WorstCaseMeasure& WorstCaseTable::entry(const std::string& attack, const std::string& label,
                                        const std::string& measure, const BreakRule& rule) {
  for (WorstCaseMeasure& m : measures_) {
    if (m.attack == attack && m.measure == measure) return m;
  }
  WorstCaseMeasure m;
  m.attack = attack;
  m.label = label;
  m.measure = measure;
  m.rule = rule;
  m.single.assign(static_cast<size_t>(images_), kNotMeasured);
  m.restarts.assign(static_cast<size_t>(images_), kNotMeasured);
  measures_.push_back(std::move(m));
  return measures_.back();
}

void WorstCaseTable::add(const std::string& attack, const std::string& label, int64_t restart,
                         int64_t first_image, const Measures& adversarial) {
  ENGINE_CHECK(restart >= 0, "WorstCaseTable::add: restart ", restart);
  for (const auto& [name, values] : adversarial) {
    const std::optional<BreakRule> rule = break_rule(name, thresholds_);
    if (!rule) continue;
    ENGINE_CHECK(first_image >= 0 && first_image + static_cast<int64_t>(values.size()) <= images_,
                 "WorstCaseTable::add: images ", first_image, "..",
                 first_image + static_cast<int64_t>(values.size()), " of ", images_);
    WorstCaseMeasure& m = entry(attack, label, name, *rule);
    for (size_t k = 0; k < values.size(); ++k) {
      const size_t i = static_cast<size_t>(first_image) + k;
      if (restart == 0) {
        m.single[i] = values[k];
      } else {
        m.restarts[i] = worse_for_defender(m.rule, m.restarts[i], values[k]);
      }
    }
  }
}

void WorstCaseTable::finish_restart(const std::string& attack, int64_t restart) {
  for (WorstCaseMeasure& m : measures_) {
    if (m.attack == attack) m.restarts_done = std::max(m.restarts_done, restart);
  }
}

int64_t WorstCaseTable::restarts_done(const std::string& attack) const {
  int64_t done = std::numeric_limits<int64_t>::max();
  for (const WorstCaseMeasure& m : measures_) {
    if (m.attack == attack) done = std::min(done, m.restarts_done);
  }
  return done == std::numeric_limits<int64_t>::max() ? 0 : done;
}

bool WorstCaseTable::has_attack(const std::string& attack) const {
  for (const WorstCaseMeasure& m : measures_) {
    if (m.attack == attack) return true;
  }
  return false;
}

std::vector<const WorstCaseMeasure*> WorstCaseTable::select(
    const std::string& attack_or_family) const {
  std::vector<const WorstCaseMeasure*> out;
  for (const WorstCaseMeasure& m : measures_) {
    if (attack_or_family.empty() || m.attack == attack_or_family ||
        attack_family(m.label) == attack_or_family) {
      out.push_back(&m);
    }
  }
  return out;
}

RobustFractions WorstCaseTable::robust_fractions(
    const std::vector<const WorstCaseMeasure*>& over) const {
  int64_t single = 0, restarts = 0, worst = 0;
  for (size_t i = 0; i < static_cast<size_t>(images_); ++i) {
    bool single_broken = false, restarts_broken = false;
    for (const WorstCaseMeasure* m : over) {
      single_broken = single_broken || is_broken(m->rule, m->single[i]);
      restarts_broken = restarts_broken || is_broken(m->rule, m->restarts[i]);
    }
    single += single_broken ? 0 : 1;
    restarts += restarts_broken ? 0 : 1;
    worst += single_broken || restarts_broken ? 0 : 1;
  }
  const double n = static_cast<double>(images_);
  return {static_cast<double>(single) / n, static_cast<double>(restarts) / n,
          static_cast<double>(worst) / n};
}

double WorstCaseTable::worst_mean(const WorstCaseMeasure& m) {
  double total = 0.0;
  for (size_t i = 0; i < m.single.size(); ++i) {
    total += worse_for_defender(m.rule, m.single[i], m.restarts[i]);
  }
  return total / static_cast<double>(m.single.size());
}

double WorstCaseTable::single_mean(const WorstCaseMeasure& m) {
  double total = 0.0;
  for (double v : m.single) total += v;
  return total / static_cast<double>(m.single.size());
}

}  // namespace attacks
