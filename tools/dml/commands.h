// The `dml` subcommands. Each lives in its own file (tools/dml/<name>.cpp), takes the arguments
// after "dml <name>", and returns the process exit code. Throw dml::UsageError for usage and
// configuration mistakes (exit 2) and engine::Error for runtime failures (exit 1).
#pragma once

#include <string>

#include "tools/dml/args.h"

namespace dml {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(Args& args);
};

int run_info(Args& args);            // tools/dml/info.cpp
int run_embed(Args& args);           // tools/dml/embed.cpp
int run_metrics(Args& args);         // tools/dml/metrics.cpp
int run_train(Args& args);           // tools/dml/train.cpp
int run_eval(Args& args);            // tools/dml/eval.cpp
int run_bench(Args& args);           // tools/dml/bench.cpp
int run_attack_command(Args& args);  // tools/dml/attack.cpp
int run_ers(Args& args);             // tools/dml/ers.cpp
int run_report(Args& args);          // tools/dml/report.cpp (+ report_grid.cpp)
// `dml bench --train CONFIG ...`, called by run_bench (tools/dml/bench_train.cpp).
int run_bench_train(const std::string& config_path, Args& args);
int run_aggregate(Args& args);  // tools/dml/aggregate.cpp
int run_hardness(Args& args);   // tools/dml/hardness.cpp
int run_import(Args& args);     // tools/dml/import.cpp

}  // namespace dml
