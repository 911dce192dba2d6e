// What report.cpp (the `dml report` command: log curves, ERS bars), report_grid.cpp (its
// retrieval-grid mode) and report_attack.cpp (its attack picture) share.
#pragma once

#include <string>
#include <vector>

#include "tools/dml/args.h"

namespace dml {

// `dml report --grid ...`: args still hold every option but --grid (docs/report.md).
int run_report_grid(Args& args);
// `dml report --attack SPEC ...`: args still hold every option (docs/report.md).
int run_report_attack(Args& args);
// `dml report --robustness --input LABEL=FILE[,FILE] ...`: args hold every option but
// --robustness (report_robustness.cpp; docs/report.md).
int run_report_robustness(Args& args);
// `dml report --cost-ers --input LABEL=FILE ...`: args hold every option but --cost-ers
// (report_cost.cpp; docs/report.md).
int run_report_cost_ers(Args& args);
// "a,b," -> {"a", "b", ""}: the comma-separated lists of --ers, --names and --runs (dml aggregate).
std::vector<std::string> split_commas(const std::string& text);

}  // namespace dml
