// Header: tools/dml/distributed.h.
#include "tools/dml/distributed.h"

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
// Within one attack, `dml attack` and `dml ers` draw every batch's targets from one generator
// stream that runs on from batch to batch, so a rank cannot start at its first batch without the
// draws of the ones before it (docs/distributed.md, "What is not distributed yet").
const char* const kDistributedSubcommands[] = {"eval", "ers", "train"};

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

}  // namespace dml
