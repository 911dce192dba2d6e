// Header: tools/dml/distributed.h.
#include "tools/dml/distributed.h"

#include <algorithm>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/dist/communicator.h"
#include "kernels/common/check.h"
#include "tools/dml/args.h"

namespace dml {

namespace {

// The subcommands whose work is divided over ranks, with results equal to a single process's
// (train: equal to one process with train.micro_batches = ranks x micro_batches; data_parallel.h).
// `dml attack` splits its batches, a rank's attack stream skipping the earlier batches' draws
// (attack_runner.h, split_over_ranks); `dml ers` divides whole attacks (runs_attack_here).
const char* const kDistributedSubcommands[] = {"eval", "ers", "train", "attack"};

}  // namespace

void check_ranks_for(const char* subcommand) {
  const engine::dist::World& world = engine::dist::world();
  if (world.size == 1) return;
  for (const char* name : kDistributedSubcommands) {
    if (std::strcmp(name, subcommand) == 0) return;
  }
  throw UsageError("started as " + std::to_string(world.size) + " MPI ranks, but 'dml " +
                   subcommand +
                   "' runs as one process (docs/distributed.md lists the subcommands that run "
                   "over several)");
}

bool writes_results() { return engine::dist::world().rank == 0; }

bool runs_attack_here(size_t attack_index) {
  const engine::dist::World& world = engine::dist::world();
  return attack_index % static_cast<size_t>(world.size) == static_cast<size_t>(world.rank);
}

void gather_attack_summaries(std::vector<AttackSummary>& summaries) {
  // This rank's attacks as "index\njson\0" records, concatenated.
  std::vector<char> mine;
  for (size_t i = 0; i < summaries.size(); ++i) {
    if (summaries[i].spec.empty() || !runs_attack_here(i)) continue;
    const std::string record =
        std::to_string(i) + "\n" + attack_summary_json(summaries[i]).dump() + '\0';
    mine.insert(mine.end(), record.begin(), record.end());
  }
  const std::vector<char> all = engine::dist::all_gather_varying(mine);
  for (size_t at = 0; at < all.size();) {
    const std::string record(&all[at]);  // up to its '\0'
    at += record.size() + 1;
    const size_t newline = record.find('\n');
    const size_t index = std::stoul(record.substr(0, newline));
    ENGINE_CHECK(index < summaries.size(), "gather_attack_summaries: attack ", index, " of ",
                 summaries.size());
    if (!summaries[index].spec.empty()) continue;
    summaries[index] = attack_summary_from_json(nlohmann::json::parse(record.substr(newline + 1)),
                                                "rank of attack " + std::to_string(index));
  }
  for (const AttackSummary& s : summaries) {
    ENGINE_CHECK(!s.spec.empty(), "gather_attack_summaries: an attack no rank ran");
  }
}

namespace {

// The sum of `values` (this rank's part of one measure) over all ranks' parts in rank order, which
// is image order: each added in turn to 0.0, as run_attack's single-process running sum.
double sum_in_image_order(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : engine::dist::all_gather_varying(values)) sum += v;
  return sum;
}

}  // namespace

void gather_split_attack(AttackSummary& summary,
                         const std::vector<std::vector<double>>& clean_values,
                         const std::vector<std::vector<double>>& adversarial_values,
                         std::vector<double>& sum_clean, std::vector<double>& sum_adversarial) {
  // The names, from the first rank that attacked a batch (rank 0 always does): "name\n"...
  std::string names;
  for (const std::string& name : summary.names) names += name + "\n";
  std::vector<char> text(names.begin(), names.end());
  text.push_back('\0');
  const std::vector<char> all_names = engine::dist::all_gather_varying(text);
  const std::string first(all_names.data());  // rank 0's, up to its '\0'
  ENGINE_CHECK(!first.empty(), "gather_split_attack: rank 0 attacked no batch");
  summary.names.clear();
  for (size_t at = 0; at < first.size();) {
    const size_t newline = first.find('\n', at);
    summary.names.push_back(first.substr(at, newline - at));
    at = newline + 1;
  }
  const size_t measures = summary.names.size();
  sum_clean.assign(measures, 0.0);
  sum_adversarial.assign(measures, 0.0);
  const std::vector<double> none;
  for (size_t m = 0; m < measures; ++m) {
    sum_clean[m] = sum_in_image_order(m < clean_values.size() ? clean_values[m] : none);
    sum_adversarial[m] =
        sum_in_image_order(m < adversarial_values.size() ? adversarial_values[m] : none);
  }
  // The perturbation report: the largest max|delta|, the NaN count's sum, the pixel range.
  attacks::PerturbationReport& p = summary.perturbation;
  const std::vector<double> reports = engine::dist::all_gather_varying(
      std::vector<double>{p.max_delta, static_cast<double>(p.nan_count), p.min_pixel, p.max_pixel});
  p.nan_count = 0;
  for (size_t at = 0; at + 4 <= reports.size(); at += 4) {
    p.max_delta = std::max(p.max_delta, reports[at]);
    p.nan_count += static_cast<int64_t>(reports[at + 1]);
    p.min_pixel = std::min(p.min_pixel, reports[at + 2]);
    p.max_pixel = std::max(p.max_pixel, reports[at + 3]);
  }
}

}  // namespace dml
