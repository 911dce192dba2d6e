// dml: train, evaluate, attack and benchmark robust deep-metric-learning models.
//
//   dml <subcommand> [options]      dml help      dml <subcommand> --help      dml --version
//
// Exit codes: 0 success, 2 usage or configuration error, 1 runtime error (README.md).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "kernels/common/check.h"
#include "tools/dml/commands.h"
#include "tools/dml/distributed.h"
#include "tools/dml/version.h"

namespace {

const dml::Command kCommands[] = {
    {"train", "train a model from a JSON config (checkpoints, logs, --resume)", dml::run_train},
    {"eval", "benign retrieval metrics of a trained checkpoint on a dataset split", dml::run_eval},
    {"info", "print a model's module tree and parameter count, or a dataset's splits",
     dml::run_info},
    {"embed", "write a model's embeddings of images or a dataset split to .npy", dml::run_embed},
    {"metrics", "retrieval and clustering metrics from .npy embeddings and labels",
     dml::run_metrics},
    {"attack", "one adversarial ranking attack over a split (CA, QA, SP-QA, TMA, ES, LTM, ...)",
     dml::run_attack_command},
    {"ers", "Empirical Robustness Score (profiles rob28, rob224) or an attack-strength curve",
     dml::run_ers},
    {"report", "training curves, ERS bars (SVG) and retrieval grids (PNG)", dml::run_report},
    {"bench",
     "time our CUDA kernels against cuDNN/cuBLAS and the measured ceilings, or whole training "
     "steps (--train) against PyTorch",
     dml::run_bench},
    {"aggregate",
     "mean and sample std over seeds of R@1, mAP, NMI, ERS and its columns (MD, JSON, SVG)",
     dml::run_aggregate},
    {"hardness", "E[H] and Var[H] of each triplet miner, H = d(a,p) - d(a,n) (HM paper, Table 1)",
     dml::run_hardness},
    {"import", "bare weights (e.g. a paper's published .pth) as a dml model file for --checkpoint",
     dml::run_import},
};

void print_usage(FILE* out) {
  std::fprintf(out, "usage: dml <subcommand> [options]\n\nsubcommands:\n");
  for (const dml::Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out, "\n%s", dml::kBackendUsage);
  std::fprintf(out, "\n'dml --version' names the source revision and what was compiled in.\n");
  std::fprintf(out, "exit codes: 0 success, 2 usage/config error, 1 runtime error\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    print_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  if (name == "--version" || name == "version") {
    std::fputs(dml::version_text().c_str(), stdout);
    return 0;
  }
  for (const dml::Command& command : kCommands) {
    if (name != command.name) continue;
    try {
      dml::Args args(argc, argv, 2);
      dml::take_backend_options(args);
      dml::check_ranks_for(command.name);  // several MPI ranks: docs/distributed.md
      return command.run(args);
    } catch (const dml::UsageError& e) {
      std::fprintf(stderr, "dml %s: %s\n(run 'dml %s --help' for usage)\n", command.name, e.what(),
                   command.name);
      return 2;
    } catch (const engine::Error& e) {
      std::fprintf(stderr, "dml %s: error: %s\n", command.name, e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dml %s: unexpected error: %s\n", command.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "dml: unknown subcommand '%s'\n\n", name.c_str());
  print_usage(stderr);
  return 2;
}
