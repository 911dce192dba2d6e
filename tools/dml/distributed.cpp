// Header: tools/dml/distributed.h.
#include "tools/dml/distributed.h"

#include <cstring>
#include <string>

#include "engine/dist/communicator.h"
#include "tools/dml/args.h"

namespace dml {

namespace {

// The subcommands whose work is divided over ranks, with results equal to a single process's.
// `dml attack` and `dml ers` draw every batch's targets from one generator stream that runs on
// from batch to batch, so a rank cannot start at its first batch without the draws of the ones
// before it (docs/distributed.md, "What is not distributed yet").
const char* const kDistributedSubcommands[] = {"eval"};

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

}  // namespace dml
