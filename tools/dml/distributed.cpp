// Header: tools/dml/distributed.h.
#include "tools/dml/distributed.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>

#include "engine/dist/communicator.h"
#include "engine/io/file_io.h"
#include "kernels/common/check.h"
#include "tools/dml/args.h"

namespace dml {

namespace {

// The subcommands whose work is divided over ranks, with results equal to a single process's
// (train: equal to one process with train.micro_batches = ranks x micro_batches; data_parallel.h).
// `dml attack` and `dml ers` split each attack's batches, a rank's attack stream skipping the
// earlier batches' draws (attack_runner.h, split_over_ranks).
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

std::optional<std::string> file_text_of_rank_zero(const std::string& path) {
  // {exists, size} on rank 0, then the bytes.
  int64_t header[2] = {0, 0};
  std::string text;
  if (writes_results() && std::filesystem::exists(path)) {
    text = engine::detail::read_whole_file(path, "for reading");
    header[0] = 1;
    header[1] = static_cast<int64_t>(text.size());
  }
  engine::dist::broadcast(header, sizeof header, 0);
  if (header[0] == 0) return std::nullopt;
  text.resize(static_cast<size_t>(header[1]));
  if (!text.empty()) engine::dist::broadcast(text.data(), text.size(), 0);
  return text;
}

namespace {

// The sum of `all` (every rank's part of one measure, in rank order, which is image order): each
// added in turn to 0.0, as run_attack's single-process running sum.
double sum_in_image_order(const std::vector<double>& all) {
  double sum = 0.0;
  for (double v : all) sum += v;
  return sum;
}

}  // namespace

attacks::Measures gather_split_attack(AttackSummary& summary,
                                      const std::vector<std::vector<double>>& clean_values,
                                      const std::vector<std::vector<double>>& adversarial_values,
                                      std::vector<double>& sum_clean,
                                      std::vector<double>& sum_adversarial) {
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
  attacks::Measures all_adversarial;
  for (size_t m = 0; m < measures; ++m) {
    sum_clean[m] = sum_in_image_order(
        engine::dist::all_gather_varying(m < clean_values.size() ? clean_values[m] : none));
    all_adversarial.emplace_back(summary.names[m],
                                 engine::dist::all_gather_varying(
                                     m < adversarial_values.size() ? adversarial_values[m] : none));
    sum_adversarial[m] = sum_in_image_order(all_adversarial.back().second);
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
  return all_adversarial;
}

}  // namespace dml
