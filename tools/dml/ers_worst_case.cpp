// The worst case per query and the sanity checks of dml ers (header: tools/dml/ers_worst_case.h).
#include "tools/dml/ers_worst_case.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "attacks/profiles.h"
#include "engine/dist/communicator.h"
#include "kernels/common/check.h"
#include "metrics/clustering.h"
#include "metrics/distance.h"
#include "metrics/ers.h"
#include "metrics/spread.h"
#include "tools/dml/distributed.h"

namespace dml {

const char kWorstCaseUsage[] =
    "  --worst-case R      also run R random restarts (rinit=1) of every attack and report, per\n"
    "                      image, the worst outcome over the attacks and restarts; the robust\n"
    "                      fraction (images no attack moved beyond its threshold), the\n"
    "                      worst-case ERS and the sanity checks (docs/attacks.md)\n"
    "  --sanity-images N   images of the eps = 1 sanity check (default 64; 0: not run)\n";

WorstCaseOptions take_worst_case_options(Args& args) {
  WorstCaseOptions options;
  options.restarts = args.take_int("--worst-case", 0);
  if (options.restarts < 0) throw UsageError("--worst-case: the restart count must be >= 0");
  options.sanity_images = args.take_int("--sanity-images", options.sanity_images);
  if (options.sanity_images < 0) throw UsageError("--sanity-images: a count >= 0");
  return options;
}

attacks::SanityVerdict check_gallery_not_collapsed(const attacks::Gallery& gallery, uint64_t seed,
                                                   double* nmi, double* pi_ratio) {
  // {NMI, pi_ratio}. Every rank holds the same gallery (gathered exactly), so all would compute the
  // same values: rank 0 alone runs the k-means and sends them (docs/distributed.md).
  double values[2] = {0.0, 0.0};
  if (engine::dist::world().rank == 0) {
    const metrics::Points points =
        metrics::make_points(gallery.embeddings, gallery.metric, "the gallery");
    values[0] = metrics::clustering_nmi(points, gallery.labels, seed);
    // pi_ratio on unit rows for E too, as evaluate_embeddings reports it (metrics/spread.h).
    values[1] = gallery.metric == metrics::Metric::E
                    ? metrics::embedding_spread(metrics::make_points(points.x.data(), points.n,
                                                                     points.d, metrics::Metric::N),
                                                gallery.labels)
                          .ratio
                    : metrics::embedding_spread(points, gallery.labels).ratio;
  }
  if (engine::dist::world().size > 1) engine::dist::broadcast(values, sizeof(values), 0);
  if (nmi != nullptr) *nmi = values[0];
  if (pi_ratio != nullptr) *pi_ratio = values[1];
  return attacks::check_not_collapsed(values[0], values[1]);
}

namespace {

nlohmann::ordered_json fractions_json(const attacks::RobustFractions& f) {
  return {{"single", f.single}, {"restarts", f.restarts}, {"worst", f.worst}};
}

nlohmann::ordered_json verdict_json(const attacks::SanityVerdict& v) {
  nlohmann::ordered_json out;
  out["checked"] = v.checked;
  out["passed"] = v.passed;
  out["detail"] = v.detail;
  return out;
}

}  // namespace

ErsWorstCase::ErsWorstCase(const WorstCaseOptions& options, int64_t images)
    : options_(options), table_(images) {}

AttackRunSettings ErsWorstCase::single_run_settings(const AttackRunSettings& settings,
                                                    const attacks::AttackSpec& spec) {
  AttackRunSettings out = settings;
  const std::string attack = attacks::attack_spec_string(spec);
  const std::string label = attacks::attack_label(spec);
  out.on_values = [this, attack, label](int64_t first, const attacks::Measures& adversarial) {
    table_.add(attack, label, 0, first, adversarial);
  };
  return out;
}

void ErsWorstCase::run_restarts(AttackSetup& setup, const attacks::AttackSpec& spec,
                                const std::function<void()>& save) {
  const std::string attack = attacks::attack_spec_string(spec);
  const std::string label = attacks::attack_label(spec);
  for (int64_t r = table_.restarts_done(attack) + 1; r <= options_.restarts; ++r) {
    AttackRunSettings settings = setup.run;
    settings.restart = r;
    settings.on_values = [this, &attack, &label, r](int64_t first,
                                                    const attacks::Measures& adversarial) {
      table_.add(attack, label, r, first, adversarial);
    };
    if (writes_results()) {
      std::fprintf(stderr, "ers: %s restart %lld/%lld\n", label.c_str(), static_cast<long long>(r),
                   static_cast<long long>(options_.restarts));
    }
    run_attack(*setup.trained.model, setup.images, setup.gallery, spec, settings);
    table_.finish_restart(attack, r);
    save();
  }
}

void ErsWorstCase::run_sanity(AttackSetup& setup, const std::vector<attacks::AttackSpec>& specs) {
  // (a) every attack (once per label) at eps = 1 on the first images, no random start, the
  // profile's step count with Madry et al.'s step 2.5 eps / steps (at least the profile's step).
  const int64_t images = std::min<int64_t>(options_.sanity_images, table_.images());
  attacks::WorstCaseTable at_one(std::max<int64_t>(images, 1), table_.thresholds());
  epsilon_one_robust_.clear();
  for (const attacks::AttackSpec& spec : images > 0 ? specs : std::vector<attacks::AttackSpec>()) {
    const std::string label = attacks::attack_label(spec);
    if (at_one.has_attack(label)) continue;
    attacks::AttackSpec big = spec;
    big.pgd.eps = 1.0;
    big.pgd.alpha = std::max(spec.pgd.alpha, 2.5 / static_cast<double>(spec.pgd.steps));
    big.pgd.random_start = false;
    AttackRunSettings settings = setup.run;
    settings.max_images = images;
    settings.save_adversarial.clear();
    settings.dump_dir.clear();
    settings.on_values = [&at_one, &label](int64_t first, const attacks::Measures& adversarial) {
      at_one.add(label, label, 0, first, adversarial);
    };
    run_attack(*setup.trained.model, setup.images, setup.gallery, big, settings);
    epsilon_one_robust_.emplace_back(label, at_one.robust_fractions(at_one.select(label)).single);
  }
  epsilon_one_images_ = images;
  // The verdict is on the attacks together (an image survives if no attack broke it): one attack
  // with a weak target choice (GTM's nearest other-class item) need not break every image alone.
  if (images > 0) {
    sanity_.epsilon_one =
        attacks::check_epsilon_one_breaks(at_one.robust_fractions(at_one.select()).single);
  } else {
    sanity_.epsilon_one = attacks::SanityVerdict();
    sanity_.epsilon_one.detail = "not run (--sanity-images 0)";
  }
  // (b) the worst over restarts 1..R against the single run, all judged measures together.
  const attacks::RobustFractions all = table_.robust_fractions(table_.select());
  sanity_.more_effort = attacks::check_more_effort_not_weaker(all.single, all.restarts);
  // (c) needs a black-box or transfer attack, which this command does not run.
  sanity_.blackbox.checked = false;
  sanity_.blackbox.detail = "not run: no black-box or transfer attack in this profile";
  // (d) the clean gallery.
  sanity_.collapse = check_gallery_not_collapsed(setup.gallery, setup.run.seed, &nmi_, &pi_ratio_);
  sanity_done_ = true;
}

nlohmann::ordered_json ErsWorstCase::worst_case_json(bool is_ers_complete) const {
  nlohmann::ordered_json out;
  out["restarts"] = options_.restarts;
  const attacks::BreakThresholds& t = table_.thresholds();
  out["thresholds"] = {{"raise_percentile_below", t.raise_percentile},
                       {"lower_percentile_at_least", t.lower_percentile},
                       {"tma_cosine_at_least", t.cosine},
                       {"es_distance_at_least", t.shift},
                       {"hit_below", t.hit}};
  out["robust_fraction"] = fractions_json(table_.robust_fractions(table_.select()));
  nlohmann::ordered_json families = nlohmann::ordered_json::object();
  for (const char* family : {"rank", "embedding", "top-1"}) {
    const auto members = table_.select(family);
    if (!members.empty()) families[family] = fractions_json(table_.robust_fractions(members));
  }
  out["families"] = families;
  if (is_ers_complete) {
    const std::vector<attacks::ErsSource>& sources = attacks::ers_sources();
    metrics::ErsRow worst{};
    for (size_t c = 0; c < sources.size(); ++c) {
      for (const attacks::WorstCaseMeasure& m : table_.measures()) {
        if (m.label == sources[c].attack && m.measure == sources[c].measure) {
          worst[c] = attacks::WorstCaseTable::worst_mean(m);
        }
      }
    }
    nlohmann::ordered_json columns;
    for (size_t c = 0; c < sources.size(); ++c) columns[metrics::ers_column_names()[c]] = worst[c];
    out["columns_worst"] = columns;
    out["ers_worst"] = metrics::empirical_robustness_score(worst);
  }
  nlohmann::ordered_json attacks_json = nlohmann::ordered_json::array();
  std::vector<std::string> seen;
  for (const attacks::WorstCaseMeasure& first : table_.measures()) {
    if (std::find(seen.begin(), seen.end(), first.attack) != seen.end()) continue;
    seen.push_back(first.attack);
    nlohmann::ordered_json attack;
    attack["attack"] = first.attack;
    attack["restarts_done"] = table_.restarts_done(first.attack);
    attack["robust_fraction"] =
        fractions_json(table_.robust_fractions(table_.select(first.attack)));
    nlohmann::ordered_json measures = nlohmann::ordered_json::object();
    for (const attacks::WorstCaseMeasure& m : table_.measures()) {
      if (m.attack != first.attack) continue;
      measures[m.measure] = {{"single_mean", attacks::WorstCaseTable::single_mean(m)},
                             {"worst_mean", attacks::WorstCaseTable::worst_mean(m)},
                             {"single", m.single},
                             {"restarts", m.restarts}};
    }
    attack["measures"] = measures;
    attacks_json.push_back(attack);
  }
  out["attacks"] = attacks_json;
  return out;
}

nlohmann::ordered_json ErsWorstCase::sanity_json() const {
  nlohmann::ordered_json out;
  out["trusted"] = sanity_done_ && sanity_.trusted();
  nlohmann::ordered_json one = verdict_json(sanity_.epsilon_one);
  one["images"] = epsilon_one_images_;
  nlohmann::ordered_json per_attack = nlohmann::ordered_json::object();
  for (const auto& [label, robust] : epsilon_one_robust_) per_attack[label] = robust;
  one["robust_fraction"] = per_attack;
  out["epsilon_one"] = one;
  out["more_effort"] = verdict_json(sanity_.more_effort);
  out["blackbox"] = verdict_json(sanity_.blackbox);
  nlohmann::ordered_json collapse = verdict_json(sanity_.collapse);
  collapse["nmi"] = nmi_;
  collapse["pi_ratio"] = pi_ratio_;
  out["collapse"] = collapse;
  return out;
}

void ErsWorstCase::print(bool is_ers_complete) const {
  const nlohmann::ordered_json worst = worst_case_json(is_ers_complete);
  std::printf(
      "\nworst case over the attacks and %lld random restarts (robust fraction: images no "
      "attack moved beyond its threshold)\n",
      static_cast<long long>(options_.restarts));
  std::printf("%-52s %10s %10s %10s\n", "attack", "single", "restarts", "worst");
  for (const nlohmann::ordered_json& a : worst.at("attacks")) {
    const auto& f = a.at("robust_fraction");
    std::printf("%-52s %10.4f %10.4f %10.4f\n", a.at("attack").get<std::string>().c_str(),
                f.at("single").get<double>(), f.at("restarts").get<double>(),
                f.at("worst").get<double>());
  }
  for (const auto& item : worst.at("families").items()) {
    const auto& f = item.value();
    std::printf("%-52s %10.4f %10.4f %10.4f\n", ("family " + item.key()).c_str(),
                f.at("single").get<double>(), f.at("restarts").get<double>(),
                f.at("worst").get<double>());
  }
  const auto& all = worst.at("robust_fraction");
  std::printf("%-52s %10.4f %10.4f %10.4f\n", "all attacks", all.at("single").get<double>(),
              all.at("restarts").get<double>(), all.at("worst").get<double>());
  if (worst.contains("ers_worst")) {
    std::printf("worst-case ERS %.1f\n", worst.at("ers_worst").get<double>());
  }
  std::printf("\nsanity checks%s\n", sanity_.trusted() ? "" : ": FLAGGED, do not trust the scores");
  const std::pair<const char*, const attacks::SanityVerdict*> checks[] = {
      {"(a) eps = 1 breaks", &sanity_.epsilon_one},
      {"(b) more effort not weaker", &sanity_.more_effort},
      {"(c) black-box not stronger", &sanity_.blackbox},
      {"(d) not collapsed", &sanity_.collapse}};
  for (const auto& [name, v] : checks) {
    std::printf("  %-28s %-8s %s\n", name,
                !v->checked ? "-"
                : v->passed ? "passed"
                            : "FLAGGED",
                v->detail.c_str());
  }
}

}  // namespace dml
