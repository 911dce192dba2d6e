// Which `dml` subcommands run over several MPI ranks (docs/distributed.md).
#pragma once

#include <cstddef>
#include <vector>

#include "tools/dml/attack_runner.h"

namespace dml {

// Called before a subcommand runs. A process not started by mpirun, or started as one rank,
// passes. Several ranks pass for the subcommands that divide their work over ranks (eval, ers,
// train); for the others it throws UsageError, instead of N copies of the same run writing the same
// files.
void check_ranks_for(const char* subcommand);

// Whether this process prints the results and writes the files of a run: rank 0 (the only rank
// of a single-process run).
bool writes_results();

// `dml ers` over several ranks runs whole attacks on different ranks: attack i (of the profile's
// list) on rank i % size. Each attack draws from its own stream (attacks::attack_stream_seed), so
// its numbers are those of a single-process run.
bool runs_attack_here(size_t attack_index);

// After every rank ran its attacks: fills each slot of `summaries` that this rank left empty
// (empty spec) with the summary the rank that ran it made, passed as attack_summary_json's
// text (doubles round-trip exactly). Every rank takes part.
void gather_attack_summaries(std::vector<AttackSummary>& summaries);

// `dml attack` over several ranks (AttackRunSettings::split_over_ranks): after each rank attacked
// its share of the batches, with `clean_values` and `adversarial_values` its images' values of
// each measure (in image order; empty on a rank that had no batch), every rank gets the whole
// run's: the measures' names, the sums over all images added in image order (so equal bit for
// bit to a single process's running sums) and the perturbation report's worst case. Every rank
// takes part.
void gather_split_attack(AttackSummary& summary,
                         const std::vector<std::vector<double>>& clean_values,
                         const std::vector<std::vector<double>>& adversarial_values,
                         std::vector<double>& sum_clean, std::vector<double>& sum_adversarial);

}  // namespace dml
