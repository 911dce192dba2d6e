// The precision modes of `dml bench` (issue 33, deliverable 4): each GEMM and convolution workload
// is timed once per mode, ours against cuBLAS / cuDNN in the same mode, so a comparison is always
// like with like. Header-only, like bench_table.h, so tests/tools/bench_test.cpp checks it
// without a GPU.
//
//   mode             GEMMs  convolutions  what it is
//   fp32             fp32   fp32          strict FP32 on both sides (every run before issue 33)
//   pytorch-default  fp32   tf32          PyTorch's default flags: cudnn.allow_tf32 = True,
//                                         cuda.matmul.allow_tf32 = False
//   tf32             tf32   tf32          TF32 tensor cores everywhere
//   bf16             bf16   bf16          BF16 operands, FP32 accumulation (autocast's choice)
//
// The libraries' math mode per precision: kernels/common/library_math.h. A mode whose precision
// has no kernel yet (engine::check_precision_implemented) prints one "not implemented" line.
#pragma once

#include <string>
#include <vector>

#include "kernels/common/precision.h"
#include "tools/dml/args.h"

namespace dml::bench {

struct PrecisionMode {
  std::string name;                 // as --precision-modes spells it
  engine::kernels::Precision gemm;  // the precision of the GEMM rows
  engine::kernels::Precision conv;  // the precision of the convolution rows
  std::string description;          // for the section header of the table
};

// Every mode, in the order `dml bench` runs them.
inline std::vector<PrecisionMode> precision_modes() {
  using engine::kernels::Precision;
  return {
      {"fp32", Precision::Fp32, Precision::Fp32, "strict FP32 GEMMs and convolutions"},
      {"pytorch-default", Precision::Fp32, Precision::Tf32,
       "PyTorch's defaults: FP32 GEMMs, TF32 convolutions"},
      {"tf32", Precision::Tf32, Precision::Tf32, "TF32 GEMMs and convolutions"},
      {"bf16", Precision::Bf16, Precision::Bf16,
       "BF16 operands, FP32 accumulation (autocast), GEMMs and convolutions"},
  };
}

// The default of --precision-modes: every mode.
inline std::string all_precision_mode_names() {
  std::string names;
  for (const PrecisionMode& mode : precision_modes())
    names += (names.empty() ? "" : ",") + mode.name;
  return names;
}

// "fp32,tf32" -> those modes, in the order written. An unknown or repeated name, or an empty
// item, is a usage error naming --precision-modes and listing the names.
inline std::vector<PrecisionMode> parse_precision_modes(const std::string& text) {
  std::vector<PrecisionMode> chosen;
  size_t begin = 0;
  while (true) {
    const size_t comma = text.find(',', begin);
    const std::string name = text.substr(begin, comma == std::string::npos ? comma : comma - begin);
    const PrecisionMode* found = nullptr;
    const std::vector<PrecisionMode> all = precision_modes();
    for (const PrecisionMode& mode : all) {
      if (mode.name == name) found = &mode;
    }
    if (found == nullptr) {
      throw UsageError("--precision-modes: unknown mode '" + name +
                       "' (expected a comma-separated "
                       "list of " +
                       all_precision_mode_names() + ")");
    }
    for (const PrecisionMode& mode : chosen) {
      if (mode.name == name) throw UsageError("--precision-modes: '" + name + "' given twice");
    }
    chosen.push_back(*found);
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return chosen;
}

// The line that opens a mode's section of the table, e.g.
// "== precision mode tf32: TF32 GEMMs and convolutions; peers cuBLAS and cuDNN in the same mode".
inline std::string format_mode_header(const PrecisionMode& mode) {
  return "== precision mode " + mode.name + ": " + mode.description +
         "; peers cuBLAS and cuDNN in the same mode";
}

}  // namespace dml::bench
