// The precision policy: one setting for the whole program saying which arithmetic the matrix
// products use, on CUDA tensors and (emulated, see below) on CPU f32 tensors
// (kernels/common/precision.h defines the values).
//
//   fp32  strict IEEE single precision, every operand bit used: the bits of every run before the
//         policy existed. The default, because it is what reproduces those runs and their
//         checkpoints bit for bit, and the error analysis of every test and paper comparison so far
//         assumes it; the faster modes are asked for by name.
//   tf32  GEMMs (matmul, linear) and convolutions (conv2d fprop, dgrad, wgrad) on CUDA run on
//         TF32 tensor cores: operands rounded to 10 mantissa bits (round to nearest, ties away
//         from zero), FP32 accumulation (kernels/matmul/matmul_tensor_core_cuda.cu,
//         kernels/conv2d/conv2d_tensor_core_cuda.cu, or the mma.sync / wgmma kernels that
//         ENGINE_TC_GEMM / ENGINE_TC_CONV name, engine/backend.h). A convolution's bias, db
//         and dgrad with C <= 4 (the direct kernel) stay FP32, and conv2d_pool_relu runs
//         unfused so that its convolution is the TF32 one. With GemmBackend::Cublas or
//         ConvBackend::Cudnn the libraries run in their TF32 math modes
//         (kernels/common/library_math.h).
//   bf16  GEMMs (matmul, linear) and convolutions (conv2d fprop, dgrad, wgrad) on CUDA run on
//         BF16 tensor cores: operands rounded to 7 mantissa bits (round to nearest, ties to even,
//         as __float2bfloat16), FP32 accumulation, outputs in FP32 (the same kernel files, tiles
//         and kernel bodies as tf32: WMMA, or mma.sync under ENGINE_TC_GEMM / ENGINE_TC_CONV=mma,
//         engine/backend.h). Tensors stay FP32 and only a product's operands are
//         rounded, inside the kernel, so batch-norm statistics, losses, optimizer state, the PGD
//         update and the images are FP32 as in every mode. As under tf32, a convolution's bias,
//         db and dgrad with C <= 4 (the direct kernel) stay FP32, and conv2d_pool_relu runs
//         unfused so that its convolution is the BF16 one. Any refusal belongs in
//         check_precision_implemented. With GemmBackend::Cublas cuBLAS multiplies the same
//         BF16-rounded operands with FP32 accumulation (cublasGemmEx; library_math.h); with
//         ConvBackend::Cudnn cuDNN convolves BF16 tensors with FP32 accumulation, its outputs
//         BF16 widened to FP32 (one more rounding than ours; conv2d_cudnn.cu).
//
// Under both tf32 and bf16 the fused linear ops of ENGINE_FUSED=1 (linear_relu,
// linear_l2_normalize; default off) run as their unfused ops on our GEMM, so that their linear
// is the tensor-core one (their fused epilogue lives in the strict SGEMM's tile).
//
// CPU f32 tensors follow tf32 and bf16 with the same rounding contract, so that a model can be
// trained and scored in either mode without a GPU: the CPU GEMM (matmul, linear) and im2col
// convolution (fprop, dgrad, wgrad) multiply copies of their operands rounded exactly as the
// tensor-core kernels round them (kernels/operand_round: cvt.rna for TF32, __float2bfloat16 for
// BF16, bit for bit), in every pass the CUDA kernels round and no other: bias, db and dgrad with
// C <= 4 (kernels::dgrad_is_first_layer, kernels/conv2d/conv2d.h) stay FP32, and the fused linear
// and conv2d_pool_relu ops run unfused. The products of rounded operands are exact in FP32; the
// sums are the CPU's FP32 sums, in its own order (Eigen's blocking, the im2col chunks), not the
// tensor cores', so CPU and CUDA agree to FP32 accumulation error, not bit for bit. The rule is
// what our kernels do; ConvBackend::Cudnn's dgrad for C <= 4 and cuBLAS's TF32 are the libraries'
// own. Under fp32 the CPU makes no copies and its bits are those of every run before. f64 tensors
// (the exact reference of the tests and gradient checks) never round.
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
// The one place where a precision without kernels would be refused (engine::Error naming
// `what`), called by the GEMM ops and by dml train before a run writes anything. Every precision
// has our kernels now, so it accepts all three.
void check_precision_implemented(Precision precision, const std::string& what);

}  // namespace engine
