// Which `dml` subcommands run over several MPI ranks (docs/distributed.md).
#pragma once

namespace dml {

// Called before a subcommand runs. A process not started by mpirun, or started as one rank,
// passes. Several ranks pass for the subcommands that divide their work over ranks (eval); for
// the others it throws UsageError, instead of N copies of the same run writing the same files.
void check_ranks_for(const char* subcommand);

// Whether this process prints the results and writes the files of a run: rank 0 (the only rank
// of a single-process run).
bool writes_results();

}  // namespace dml
