// Which `dml` subcommands run over several MPI ranks (docs/distributed.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tools/dml/attack_runner.h"

namespace dml {

// Called before a subcommand runs. A process not started by mpirun, or started as one rank,
// passes. Several ranks pass for the subcommands that divide their work over ranks (eval,
// attack, ers, train); for the others it throws UsageError, instead of N copies of the same run
// writing the same files.
void check_ranks_for(const char* subcommand);

// Whether this process prints the results and writes the files of a run: rank 0 (the only rank
// of a single-process run).
bool writes_results();

// The contents of the file at `path` as rank 0 reads it (nullopt where rank 0 finds no file), on
// every rank: a file rank 0 wrote (`dml ers --out`, read back by --resume) need not be on the
// other ranks' machines, and every rank must take rank 0's decisions. Every rank takes part.
std::optional<std::string> file_text_of_rank_zero(const std::string& path);

// `dml attack` and `dml ers` over several ranks (AttackRunSettings::split_over_ranks): after each
// rank attacked its share of the batches, with `clean_values` and `adversarial_values` its images'
// values of each measure (in image order; empty on a rank that had no batch), every rank gets the
// whole run's: the measures' names, the sums over all images added in image order (so equal bit
// for bit to a single process's running sums) and the perturbation report's worst case. Returns
// every image's adversarial values per measure (in image order). Every rank takes part.
attacks::Measures gather_split_attack(AttackSummary& summary,
                                      const std::vector<std::vector<double>>& clean_values,
                                      const std::vector<std::vector<double>>& adversarial_values,
                                      std::vector<double>& sum_clean,
                                      std::vector<double>& sum_adversarial);

}  // namespace dml
