// What report.cpp (the `dml report` command: log curves, ERS bars) and report_grid.cpp (its
// retrieval-grid mode) share.
#pragma once

#include "tools/dml/args.h"

namespace dml {

// `dml report --grid ...`: args still hold every option but --grid (docs/report.md).
int run_report_grid(Args& args);

}  // namespace dml
