// dml ers: the Empirical Robustness Score of a checkpoint (docs/attacks.md; Zhou et al. TPAMI §5,
// §6.1.4; robrank tools/pjswipe.py) — or any other attack profile, e.g. the qccurve28 curve.
//
//   dml ers --checkpoint FILE --profile rob28|rob224|qccurve28 [--json] [--out FILE] ...
//
// Runs every attack of the profile over the split, prints the raw-score row in the papers' column
// order (CA+ CA- QA+ QA- TMA ES:D ES:R LTM GTM GTT) and the ERS; --out writes the JSON (atomic).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attacks/curve_profiles.h"
#include "attacks/profiles.h"
#include "engine/dist/communicator.h"
#include "engine/io/file_io.h"
#include "engine/precision.h"
#include "kernels/common/check.h"
#include "metrics/ers.h"
#include "tools/dml/attack_runner.h"
#include "tools/dml/attack_setup.h"
#include "tools/dml/commands.h"
#include "tools/dml/curve_results.h"
#include "tools/dml/distributed.h"
#include "tools/dml/ers_worst_case.h"
#include "tools/dml/output_files.h"
#include "tools/dml/result_json.h"
#include "tools/dml/table1_results.h"

namespace dml {

namespace {

// ers.json's "random_streams": each attack draws from its own stream (attacks::attack_stream_seed).
// Files without it come from binaries before 2026-11-25, where every attack restarted one stream.
constexpr const char* kRandomStreams = "one per attack";

const char kUsage[] =
    "usage: dml ers --checkpoint FILE --profile NAME [options]\n"
    "\n"
    "Runs an attack profile over a split. rob28 / rob224: the ten ERS columns (CA+ CA- QA+ QA-\n"
    "TMA ES:D ES:R LTM GTM GTT, nine attacks) and the Empirical Robustness Score; qccurve28: CA+,\n"
    "CA-, SP-QA+ and SP-QA- for eps = 0, 7, ..., 77 / 255 (the curve of Zhou et al. TPAMI,\n"
    "Fig. 6); curve28 / curve224: every ERS attack over an eps sweep (to 1) and a steps sweep\n"
    "(1 to 128), each point's raw score and ERS-column score under \"curve\" (docs/attacks.md);\n"
    "table1-28: the attack cells of Zhou et al. TPAMI Tab. 1 (CA+- with w = 1, 2, 5, 10 and "
    "SP-QA+-\n"
    "with m = 1, 2, 5, 10 at eps = 8/255 and 77/255), arranged as the table under \"table1\".\n"
    "\n"
    "  --profile NAME      rob28 (28x28 models), rob224 (224x224 models), qccurve28, curve28,\n"
    "                      curve224 or table1-28 (rob224-paper: rob224 with the paper's step\n"
    "                      1/255, not 3/255)\n"
    "  --out FILE          also write the JSON to FILE (atomically, after every attack; "
    "\"complete\"\n"
    "                      is false until the last one has finished)\n"
    "  --resume            keep the attacks an interrupted run already wrote to --out (same\n"
    "                      checkpoint contents, under any path; same profile, metric, seed,\n"
    "                      --batch-size, --max-images and --robrank-compat) and run only the rest\n"
    "  --overwrite         replace an existing --out file (without it, or --resume, an existing\n"
    "                      result is refused before any work)\n";

// FNV-1a (64 bit) of a file's bytes, as 16 hex digits: tells a resumed ERS whether the weights
// at the checkpoint path are still the ones the finished attacks ran on (a retrained model at
// the same path is not). Not a cryptographic hash; it guards against mistakes, not against forgery.
std::string file_fnv1a64(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ENGINE_CHECK(in.good(), path, ": cannot be read");
  uint64_t hash = 14695981039346656037ull;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize got = in.gcount();
    for (std::streamsize i = 0; i < got; ++i) {
      hash ^= static_cast<unsigned char>(buffer[static_cast<size_t>(i)]);
      hash *= 1099511628211ull;
    }
  }
  ENGINE_CHECK(in.eof(), path, ": read error");
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

// What a run with `setup` writes into its --out file and a file it resumes must hold too
// (read_ers_resume, tools/dml/result_json.h): the same weights (by their hash: the checkpoint may
// have been moved or named by another path since), profile, metric and selection settings (its
// device may differ).
ErsResumeKey ers_resume_key(const std::string& weights_hash, const std::string& profile,
                            const AttackSetup& setup, const WorstCaseOptions& worst_options) {
  ErsResumeKey key;
  key.weights_fnv1a64 = weights_hash;
  key.profile = profile;
  key.metric = losses::metric_name(setup.metric);
  key.batch_size = setup.run.batch_size;  // the selection draws go batch by batch
  key.dataset = setup.dataset + ":" + setup.split;
  key.robrank_compat = setup.run.robrank_compat;
  key.seed = setup.run.seed;
  key.random_streams = kRandomStreams;
  key.precision = engine::precision_name(engine::precision());
  key.bn_branch = setup.bn_branch;
  key.images = setup.run.max_images > 0
                   ? std::min<int64_t>(setup.run.max_images, setup.images.labels.size())
                   : static_cast<int64_t>(setup.images.labels.size());
  key.worst_case_restarts = worst_options.restarts;
  return key;
}

// The attacks of `profile`, parsed; an unknown name is a usage error.
std::vector<attacks::AttackSpec> profile_attack_specs(const std::string& profile) {
  std::vector<attacks::AttackSpec> specs;
  try {
    for (const std::string& text : attacks::profile_specs(profile)) {
      specs.push_back(attacks::parse_attack_spec(text));
    }
  } catch (const engine::Error& e) {
    throw UsageError(std::string("--profile: ") + e.what());
  }
  return specs;
}

// The ten raw ERS columns (CA+ ... GTT) from the summaries of an ERS profile's attacks.
metrics::ErsRow ers_raw_row(const std::vector<AttackSummary>& summaries,
                            const std::string& profile) {
  metrics::ErsRow raw{};
  const std::vector<attacks::ErsSource>& sources = attacks::ers_sources();
  for (size_t c = 0; c < sources.size(); ++c) {
    bool found = false;
    for (const AttackSummary& s : summaries) {
      if (s.label == sources[c].attack) {
        raw[c] = adversarial_value(s, sources[c].measure);
        found = true;
      }
    }
    ENGINE_CHECK(found, "profile ", profile, " has no ", sources[c].attack, " attack");
  }
  return raw;
}

// The attacks done so far and what identifies the run: the JSON that `dml ers` prints and, with
// --out, rank 0 rewrites (atomically) after every attack, with "complete": false until the last,
// so an interrupted hour-long run keeps what it finished.
struct ErsReport {
  ErsReport(const AttackSetup& setup_, std::string checkpoint_, std::string weights_hash_,
            std::string profile_, std::string out_path_, const ErsWorstCase* worst_)
      : setup(setup_),
        checkpoint(std::move(checkpoint_)),
        weights_hash(std::move(weights_hash_)),
        profile(std::move(profile_)),
        out_path(std::move(out_path_)),
        worst(worst_) {}

  const AttackSetup& setup;
  std::string checkpoint, weights_hash, profile, out_path;
  const ErsWorstCase* worst;  // --worst-case, else nullptr
  std::vector<AttackSummary> summaries;
  nlohmann::ordered_json attacks_json = nlohmann::ordered_json::array();
  double seconds = 0.0;

  void add(const AttackSummary& summary) {
    summaries.push_back(summary);
    attacks_json.push_back(attack_summary_json(summary));
  }

  nlohmann::ordered_json write(bool complete) const {
    nlohmann::ordered_json out;
    out["checkpoint"] = checkpoint;
    out["weights_fnv1a64"] = weights_hash;
    out["profile"] = profile;
    out["metric"] = losses::metric_name(setup.metric);
    out["batch_size"] = setup.run.batch_size;
    out["dataset"] = setup.dataset + ":" + setup.split;
    out["images"] = summaries.empty() ? 0 : summaries.front().images;
    out["robrank_compat"] = setup.run.robrank_compat;
    out["seed"] = setup.run.seed;
    out["random_streams"] = kRandomStreams;
    out["device"] = setup.device.str();
    out["precision"] = engine::precision_name(engine::precision());  // this run's GEMMs and convs
    out["trained_precision"] = engine::precision_name(setup.trained.precision);
    out["bn_branch"] = setup.bn_branch;
    out["seconds"] = seconds;
    out["complete"] = complete;
    const bool is_ers = attacks::is_ers_profile(profile);
    if (complete && is_ers) {
      const metrics::ErsRow raw = ers_raw_row(summaries, profile);
      for (size_t c = 0; c < raw.size(); ++c) out[metrics::ers_column_names()[c]] = raw[c];
      out["ers"] = metrics::empirical_robustness_score(raw);
    }
    if (attacks::is_curve_profile(profile)) {
      out["curve"] = curve_results_json(profile, setup.dataset, summaries);
    }
    if (attacks::is_table1_profile(profile)) out["table1"] = table1_results_json(summaries);
    out["attacks"] = attacks_json;
    if (worst) {
      out["worst_case"] = worst->worst_case_json(complete && is_ers);
      if (complete) out["sanity"] = worst->sanity_json();
    }
    if (!out_path.empty() && writes_results()) {
      engine::detail::write_file_atomically(out_path, out.dump(2) + "\n");
    }
    return out;
  }
};

// The finished report as a table: one row per attack measure, then the ERS row (ERS profiles),
// the curve tables (curve profiles) and the worst case (--worst-case).
void print_ers_report(const ErsReport& report, const nlohmann::ordered_json& out) {
  const AttackSetup& setup = report.setup;
  std::printf("profile %s on %s %s (%lld images), %s, %.0fs\n", report.profile.c_str(),
              setup.dataset.c_str(), setup.split.c_str(),
              static_cast<long long>(out["images"].get<int64_t>()), setup.device.str().c_str(),
              report.seconds);
  std::printf("precision %s (trained in %s), BN branch %lld\n\n",
              out["precision"].get<std::string>().c_str(),
              out["trained_precision"].get<std::string>().c_str(),
              static_cast<long long>(setup.bn_branch));
  std::printf("%-52s %-16s %10s %12s %10s\n", "attack", "measure", "clean", "adversarial",
              "max|delta|");
  for (const AttackSummary& s : report.summaries) {
    for (size_t m = 0; m < s.names.size(); ++m) {
      std::printf("%-52s %-16s %10.3f %12.3f %10.5f\n", m == 0 ? s.spec.c_str() : "",
                  s.names[m].c_str(), s.clean[m], s.adversarial[m], s.perturbation.max_delta);
    }
  }
  const bool is_ers = attacks::is_ers_profile(report.profile);
  if (is_ers) {
    const metrics::ErsRow raw = ers_raw_row(report.summaries, report.profile);
    std::printf("\n");
    for (const std::string& name : metrics::ers_column_names()) std::printf("%7s", name.c_str());
    std::printf("%7s\n", "ERS");
    for (double v : raw) std::printf("%7.3g", v);
    std::printf("%7.1f\n", metrics::empirical_robustness_score(raw));
  }
  if (attacks::is_curve_profile(report.profile)) print_curve_tables(out.at("curve"));
  if (attacks::is_table1_profile(report.profile)) print_table1(out.at("table1"));
  if (report.worst) report.worst->print(is_ers);
}

// --resume: the attacks the previous run finished in `out_path`, read from rank 0's copy of the
// file (the one it wrote) so every rank skips the same ones; their time is added to the report's.
std::vector<AttackSummary> resumed_attacks(const std::string& out_path,
                                           const std::string& checkpoint, const ErsResumeKey& key,
                                           ErsWorstCase* worst, size_t attacks, ErsReport& report) {
  const std::optional<std::string> previous_text = file_text_of_rank_zero(out_path);
  if (!previous_text) return {};
  const ErsResume previous =
      read_ers_resume(*previous_text, out_path, key, worst ? &worst->table() : nullptr);
  if (previous.checkpoint.value_or("") != checkpoint && writes_results()) {
    std::fprintf(stderr, "ers: %s was written for %s: the same weights as %s\n", out_path.c_str(),
                 previous.checkpoint.value_or("(no path)").c_str(), checkpoint.c_str());
  }
  for (const AttackSummary& f : previous.finished) report.seconds += f.seconds;
  if (writes_results()) {
    std::fprintf(stderr, "ers: resuming %s: %zu of %zu attacks already done\n", out_path.c_str(),
                 previous.finished.size(), attacks);
  }
  return previous.finished;
}

}  // namespace

int run_ers(Args& args) {
  if (args.take_flag("--help") || args.take_flag("-h")) {
    std::fputs(kUsage, stdout);
    std::fputs(kWorstCaseUsage, stdout);
    std::fputs(kAttackCommonUsage, stdout);
    return 0;
  }
  const std::string profile = args.take_string("--profile");
  const std::string out_path = args.take_string("--out", "");
  const ExistingResult existing = take_existing_result_flags(args, /*can_resume=*/true);
  const bool resume = existing == ExistingResult::kResume;
  AttackCommonOptions options = take_attack_options(args);
  const WorstCaseOptions worst_options = take_worst_case_options(args);
  args.finish();
  refuse_output_over_input(out_path, "--out", options.checkpoint, "--checkpoint");
  if (resume && out_path.empty()) throw UsageError("--resume needs --out (the file to resume)");
  check_result_file(out_path, "--out", existing);
  std::vector<attacks::AttackSpec> specs = profile_attack_specs(profile);
  AttackSetup setup = setup_attack(options);
  if (!writes_results()) setup.run.progress = false;  // several MPI ranks: rank 0 shows progress
  const std::string weights_hash = file_fnv1a64(options.checkpoint);
  const int64_t total_images = static_cast<int64_t>(setup.images.labels.size());
  // Several MPI ranks: every attack's batches split over them, as `dml attack` does.
  setup.run.split_over_ranks = engine::dist::world().size > 1;
  std::unique_ptr<ErsWorstCase> worst;  // --worst-case (tools/dml/ers_worst_case.h)
  if (worst_options.enabled()) {
    worst = std::make_unique<ErsWorstCase>(
        worst_options,
        setup.run.max_images > 0 ? std::min(setup.run.max_images, total_images) : total_images);
  } else {
    // The collapse check (d) costs one k-means; with --worst-case it is in the report.
    const attacks::SanityVerdict collapse =
        check_gallery_not_collapsed(setup.gallery, setup.run.seed);
    if (writes_results()) {
      std::fprintf(stderr, "ers: sanity check (d), embeddings not collapsed: %s, %s\n",
                   collapse.passed ? "passed" : "FLAGGED", collapse.detail.c_str());
    }
  }
  ErsReport report(setup, options.checkpoint, weights_hash, profile, out_path, worst.get());

  const std::vector<AttackSummary> finished =
      resume ? resumed_attacks(out_path, options.checkpoint,
                               ers_resume_key(weights_hash, profile, setup, worst_options),
                               worst.get(), specs.size(), report)
             : std::vector<AttackSummary>{};
  for (attacks::AttackSpec& spec : specs) {
    complete_spec(spec, setup.dataset);
    const std::string canonical = attacks::attack_spec_string(spec);
    auto done = std::find_if(finished.begin(), finished.end(),
                             [&](const AttackSummary& f) { return f.spec == canonical; });
    if (done != finished.end()) {
      report.add(*done);
    } else {
      report.add(run_attack(*setup.trained.model, setup.images, setup.gallery, spec,
                            worst ? worst->single_run_settings(setup.run, spec) : setup.run));
      report.seconds += report.summaries.back().seconds;
      if (report.summaries.size() < specs.size()) report.write(false);
    }
    if (worst) worst->run_restarts(setup, spec, [&] { report.write(false); });
  }
  if (worst) worst->run_sanity(setup, specs);
  const nlohmann::ordered_json out = report.write(true);
  if (!writes_results()) return 0;
  if (setup.json) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    print_ers_report(report, out);
  }
  return 0;
}

}  // namespace dml
