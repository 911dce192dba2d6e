// Run-time choice of the implementation behind convolution and dense GEMM on CUDA tensors.
//
//   ConvBackend::Ours   our implicit-GEMM kernels (kernels/conv2d/conv2d_cuda.cu)   [default]
//   ConvBackend::Cudnn  cuDNN's convolutions (kernels/conv2d/conv2d_cudnn.cu), for validation and
//                       as the peer in `dml bench`
//   GemmBackend::Ours   our tiled SGEMM (kernels/matmul/matmul_cuda.cu)             [default]
//   GemmBackend::Cublas cublasSgemm (kernels/matmul/matmul_cublas.cu)
//
// Both defaults are Ours: the product's claim is that every operator runs through kernels we
// wrote, so a library is only ever used when asked for (API, `--conv cudnn`, or the environment).
// Every backend computes in strict FP32 (no TF32 tensor cores), so the choice changes speed and
// the rounding of sums, never the precision class.
//
// Initial value: the first read of conv_backend() (gemm_backend()) looks at the environment
// variable ENGINE_CONV=ours|cudnn (ENGINE_GEMM=ours|cublas); unset or empty means Ours, anything
// else is an engine::Error naming the variable and the value. It is read lazily (never during
// static initialization), once per process; set_*_backend() overrides it from then on. The
// setting is process-wide (all threads) and affects only CUDA tensors; CPU ops ignore it.
//
// Our convolutions' block-tile width (kernels::ConvTile, kernels/conv2d/conv2d.h) is a third
// setting of the same kind: ENGINE_CONV_TILE=auto|128|64|32, read the same way; unset or empty
// means auto (the rule kernels::conv2d_pick_tile chooses per pass and shape), a number forces
// that many tile columns for fprop, dgrad and wgrad. Every width gives the same bits but wgrad's
// when its split-K count changes; it is there so one GPU run can time each width (`dml bench`
// times them all by itself).
//
// The attack loop (attacks/pgd.h), chosen the same way by ENGINE_ATTACK_LOOP=eager|captured:
//   AttackLoop::Eager     every PGD step issued op by op through autograd                [default]
//   AttackLoop::Captured  on CUDA tensors, the steps after the first replay one CUDA graph of a
//                         step (engine/cuda_graph.h); the same bits as Eager
// Eager stays the default until a GPU has timed the captured loop (docs/performance.md).
//
// Our TF32 and BF16 tensor-core GEMM (matmul under the tf32 and bf16 precision policies,
// engine/precision.h), chosen the same way by ENGINE_TC_GEMM=wmma|mma|wgmma|wgmma-overlap:
//   TensorCoreGemm::Wmma  WMMA m16n16k8 (TF32) / m16n16k16 (BF16), 64 x 64 tiles, a register
//                         pipeline (kernels/matmul/matmul_tensor_core_cuda.cu) [default]
//   TensorCoreGemm::Mma   mma.sync m16n8k8 (TF32) / m16n8k16 (BF16), 128 x 64 tiles, a 3-stage
//                         cp.async pipeline (kernels/matmul/matmul_mma_cuda.cu)
//   TensorCoreGemm::Wgmma wgmma m64n128k8 (TF32) / m64n128k16 (BF16) (sm_90a), 128 x 128 tiles,
//                         a 3-stage (TF32) or 2-stage plus BF16 conversion (BF16) cp.async
//                         pipeline (kernels/matmul/matmul_wgmma_cuda.cu); on a device that is not
//                         compute capability 9.0 matmul throws engine::Error (no silent fallback)
//   TensorCoreGemm::WgmmaOverlap  the same with one multiply in flight across a step
//                         (wgmma.wait_group 1): 4 TF32 stages (64 KiB) or 3 FP32 + 3 BF16 (72 KiB)
//                         of dynamic shared memory (kernels::WgmmaPipeline::kOverlapped)
// All round the operands alike and accumulate in FP32; the sums' rounding may differ. Wmma stays
// the default until a GPU has timed them.
//
// Our TF32 and BF16 tensor-core convolution (conv2d under the tf32 and bf16 policies), chosen the
// same way by ENGINE_TC_CONV=wmma|mma:
//   TensorCoreConv::Wmma  WMMA m16n16k8 / m16n16k16, 64 x 64 tiles, a register pipeline
//                         (kernels/conv2d/conv2d_tensor_core_cuda.cu) [default]
//   TensorCoreConv::Mma   mma.sync m16n8k8 / m16n8k16, 128 x 64 tiles, a 3-stage cp.async
//                         pipeline (kernels/conv2d/conv2d_mma_cuda.cu), fprop, dgrad and wgrad
// The same results class (operands rounded alike, FP32 sums); Wmma stays the default until a GPU
// has timed the two.
#pragma once

#include <string>

#include "kernels/conv2d/conv2d.h"

namespace engine {

enum class ConvBackend { Ours, Cudnn };
enum class GemmBackend { Ours, Cublas };
enum class AttackLoop { Eager, Captured };

void set_conv_backend(ConvBackend backend);
ConvBackend conv_backend();
void set_gemm_backend(GemmBackend backend);
GemmBackend gemm_backend();

// "ours" / "cudnn" / "cublas": the spelling used by the environment variables and `dml --conv`.
const char* backend_name(ConvBackend backend);
const char* backend_name(GemmBackend backend);
// Parse that spelling; `what` names the source in the error ("ENGINE_CONV", "--conv", ...).
ConvBackend parse_conv_backend(const std::string& text, const std::string& what = "conv backend");
GemmBackend parse_gemm_backend(const std::string& text, const std::string& what = "gemm backend");

void set_conv_tile(kernels::ConvTile tile);
kernels::ConvTile conv_tile();
// "auto" / "128" / "64" / "32", the spelling of ENGINE_CONV_TILE, and its parser.
const char* conv_tile_name(kernels::ConvTile tile);
kernels::ConvTile parse_conv_tile(const std::string& text, const std::string& what = "conv tile");
// Fused kernels (issue 32): whether C2F2 runs its conv -> pool -> ReLU blocks through the fused
// op engine::conv2d_pool_relu (kernels/conv2d_pool_relu) instead of three unfused ops. The same
// function; on CUDA the same bits (the fused kernel keeps the unfused ops' arithmetic order), on
// the CPU the fused op is the plain-loop reference (slow: for checking, not for training).
// Initial value: the environment variable ENGINE_FUSED=0|1, read lazily once per process like
// ENGINE_CONV; unset or empty means 0, anything else is an engine::Error naming it. Default off
// until a GPU has timed the fused kernels against the unfused ones (none has yet).
void set_fused_kernels(bool on);
bool fused_kernels();
void set_attack_loop(AttackLoop loop);
AttackLoop attack_loop();
const char* attack_loop_name(AttackLoop loop);  // "eager" / "captured"
AttackLoop parse_attack_loop(const std::string& text, const std::string& what = "attack loop");
enum class TensorCoreGemm { Wmma, Mma, Wgmma, WgmmaOverlap };
void set_tensor_core_gemm(TensorCoreGemm gemm);
TensorCoreGemm tensor_core_gemm();
const char* tensor_core_gemm_name(TensorCoreGemm gemm);  // "wmma" / "mma" / "wgmma"
TensorCoreGemm parse_tensor_core_gemm(const std::string& text,
                                      const std::string& what = "tensor-core gemm");
enum class TensorCoreConv { Wmma, Mma };
void set_tensor_core_conv(TensorCoreConv conv);
TensorCoreConv tensor_core_conv();
const char* tensor_core_conv_name(TensorCoreConv conv);  // "wmma" / "mma"
TensorCoreConv parse_tensor_core_conv(const std::string& text,
                                      const std::string& what = "tensor-core conv");

}  // namespace engine
