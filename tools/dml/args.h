// A small, strict command-line parser for the `dml` subcommands.
//
//   Args args(argc, argv, 2);                 // skip "dml <subcommand>"
//   std::string model = args.take_string("--model");            // required
//   int64_t dim = args.take_int("--embedding-dim", 512);        // optional with default
//   bool json = args.take_flag("--json");
//   args.finish();                           // anything not taken is an error
//
// Both "--key value" and "--key=value" work. Every mistake throws UsageError, which `dml` turns
// into exit code 2 with the message (README.md).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/device.h"
#include "kernels/common/metric.h"

namespace dml {

class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message) : std::runtime_error(message) {}
};

class Args {
 public:
  Args(int argc, char** argv, int first);
  explicit Args(std::vector<std::string> tokens);

  bool has(const std::string& key) const;
  bool take_flag(const std::string& key);
  std::string take_string(const std::string& key);  // required
  std::string take_string(const std::string& key, const std::string& fallback);
  std::optional<std::string> take_optional(const std::string& key);
  int64_t take_int(const std::string& key);
  int64_t take_int(const std::string& key, int64_t fallback);
  double take_double(const std::string& key, double fallback);
  // A repeatable option: every value of --set k=v, in order.
  std::vector<std::string> take_all(const std::string& key);
  // Throws UsageError naming the first argument nobody asked for.
  void finish() const;

 private:
  struct Token {
    std::string text;
    bool used = false;
  };
  std::optional<size_t> find(const std::string& key) const;
  std::string value_at(size_t index, const std::string& key);
  std::vector<Token> tokens_;
};

// The one rule for input files named on the command line or in the config (README, "Exit
// codes"): a path that does not exist, or names a folder where a file is expected, is a usage
// error (exit 2), found before any work; a file that exists but cannot be read or parsed is a
// runtime error (exit 1) from the reader, naming the file. `what` names the option or config key
// ("--checkpoint", "config key 'model.pretrained'").
void require_input_file(const std::string& path, const std::string& what);

// UsageError when the file an output option names is the existing file an input option names
// (`dml ers --out` pointing at the checkpoint would replace the weights with the results).
void refuse_output_over_input(const std::string& output, const std::string& output_option,
                              const std::string& input, const std::string& input_option);

// The options every subcommand takes: --conv ours|cudnn and --gemm ours|cublas choose the
// implementation of convolution and dense GEMM on CUDA tensors for the whole process
// (engine/backend.h; they override ENGINE_CONV / ENGINE_GEMM); --precision fp32|tf32|bf16 sets
// the precision policy (engine/precision.h). UsageError for another value.
void take_backend_options(Args& args);
extern const char kBackendUsage[];

// A device option: "cpu", "cuda", "cuda:N", or "auto" / none for CUDA when a GPU is present.
// UsageError naming `what` (e.g. "--device") for a malformed value; engine::Error (exit code 1)
// for a CUDA device that is not there.
engine::Device parse_device_option(const std::optional<std::string>& text,
                                   const std::string& what = "--device");

// --metric N|E|C (kernels/common/metric.h), if given; UsageError naming --metric for another value.
std::optional<engine::kernels::Metric> take_metric_option(Args& args);

// "1,2,4" -> {1, 2, 4}; throws UsageError naming `what` on anything else.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what);

}  // namespace dml
