// The precision policy: one setting for the whole program saying which arithmetic the matrix
// products on CUDA tensors use (kernels/common/precision.h defines the values).
//
//   fp32  strict IEEE single precision, every operand bit used: the bits of every run before the
//         policy existed. The default, because it is what reproduces those runs and their
//         checkpoints bit for bit, and the error analysis of every test and paper comparison so far
//         assumes it; the faster modes are asked for by name.
//   tf32  GEMMs (matmul, linear) on CUDA run on TF32 tensor cores: operands rounded to 10
//         mantissa bits (round to nearest, ties away from zero), FP32 accumulation
//         (kernels/matmul/matmul_tensor_core_cuda.cu). Convolutions stay strict FP32 for now:
//         their tensor-core kernels are the next step (issue 33). With GemmBackend::Cublas it is
//         an error (cuBLAS's TF32 math mode is not wired yet).
//   bf16  accepted by the parser so configs can name it, but no BF16 kernel exists yet: the first
//         GEMM of a run (on any device) fails with "precision bf16 is not implemented yet".
//
// CPU tensors ignore tf32: the CPU kernels always compute in the tensor's dtype (Eigen, strict
// FP32/FP64), so a CPU run's bits do not depend on the setting.
//
// The setting is process-wide (all threads), like engine/backend.h's, and read when an op runs.
// It starts as fp32 and unset; set_precision() sets it (`--precision` on every dml subcommand,
// the config key `precision` of dml train), and precision_is_set() tells whether anything did.
#pragma once

#include <string>

#include "kernels/common/precision.h"

namespace engine {

using kernels::Precision;

void set_precision(Precision precision);
Precision precision();    // Fp32 until set
bool precision_is_set();  // whether set_precision() was called in this process

// "fp32" / "tf32" / "bf16": the spelling of `--precision` and of the config key.
const char* precision_name(Precision precision);
// Parses that spelling; `what` names the source in the error ("--precision", "config key ...").
Precision parse_precision(const std::string& text, const std::string& what = "precision");
// Throws engine::Error "<what>: precision bf16 is not implemented yet ..." for a precision
// without kernels (bf16); nothing for fp32 and tf32.
void check_precision_implemented(Precision precision, const std::string& what);

}  // namespace engine
