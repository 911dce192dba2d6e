// conv2d: 2-D cross-correlation (what deep-learning frameworks call convolution), NCHW.
//
//   x  [N, C, H, W]  input          w  [K, C, R, S]  weight       b [K] bias (optional)
//   y  [N, K, P, Q]  output, P = out_h(), Q = out_w()
//
//   fprop:  y[n,k,p,q]  = b[k] + sum_{c,r,s} x[n, c, p*sh - ph + r*dh, q*sw - pw + s*dw] w[k,c,r,s]
//   dgrad:  dx[n,c,h,w] = sum over every (k,p,q,r,s) with h = p*sh - ph + r*dh and
//                         w = q*sw - pw + s*dw of dy[n,k,p,q] w[k,c,r,s]
//   wgrad:  dw[k,c,r,s] = sum_{n,p,q} dy[n,k,p,q] x[n, c, p*sh - ph + r*dh, q*sw - pw + s*dw]
//           db[k]       = sum_{n,p,q} dy[n,k,p,q]
// Reads of x outside [0, H) x [0, W) are zero padding. (fprop/dgrad/wgrad: cuDNN/CUTLASS names.)
//
// Two CPU implementations with identical arguments:
//  - conv2d_*_cpu: the reference (the oracle of every other conv path). Seven nested loops written
//    straight from the formulas above, no cleverness.
//  - conv2d_*_fast_cpu: im2col + one GEMM per image (Eigen), OpenMP over the batch. This is what
//    engine::conv2d runs; tests hold it to the reference.
// On CUDA (f32, device pointers, launched on the current stream, no host synchronization):
//  - conv2d_*_cuda: our implicit-GEMM kernels (conv2d_cuda.cu; mapping, tiles and costs there);
//  - conv2d_*_tensor_core_cuda: the same implicit GEMMs on TF32 tensor cores under the precision
//    policy (conv2d_tensor_core_cuda.cu);
//  - conv2d_*_cudnn: cuDNN's convolutions (conv2d_cudnn.cu), the run-time alternative
//    (engine/backend.h); without cuDNN, conv2d_cudnn_stub.cpp makes them throw.
// All outputs are overwritten, never accumulated into. Pointers are to contiguous arrays.
// Callers validate the geometry (engine/ops/conv2d.cpp): out_h(), out_w() >= 1.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/precision.h"

namespace engine::kernels {

struct Conv2dShape {
  int64_t N = 0, C = 0, H = 0, W = 0;  // input
  int64_t K = 0, R = 0, S = 0;         // K filters of C x R x S
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;

  // P and Q: how many positions of the dilated kernel fit in the padded input (floor).
  int64_t out_h() const { return (H + 2 * pad_h - dilation_h * (R - 1) - 1) / stride_h + 1; }
  int64_t out_w() const { return (W + 2 * pad_w - dilation_w * (S - 1) - 1) / stride_w + 1; }
};

// Work of one pass by count (fprop, dgrad and wgrad alike: three GEMMs over one index space):
// 2 N K P Q C R S FLOPs (one multiply-add per output and reduction element), and the compulsory
// bytes, x [N,C,H,W], w [K,C,R,S] and y [N,K,P,Q] once each in f32.
inline double conv2d_flops(const Conv2dShape& s) {
  return 2.0 * double(s.N) * double(s.K) * double(s.out_h()) * double(s.out_w()) * double(s.C) *
         double(s.R) * double(s.S);
}
inline double conv2d_bytes(const Conv2dShape& s) {
  const double x = double(s.N) * double(s.C) * double(s.H) * double(s.W);
  const double w = double(s.K) * double(s.C) * double(s.R) * double(s.S);
  const double y = double(s.N) * double(s.K) * double(s.out_h()) * double(s.out_w());
  return 4.0 * (x + w + y);
}

// The first-layer dgrad rule, one definition for every backend: a layer with C <= 4 input
// channels and R S <= 2048 filter taps (an image layer such as C2F2's conv1) gets its input
// gradient from the direct FP32 kernel in every precision, because an implicit GEMM's
// 32-to-128-column tile over C would be mostly zero columns (conv2d_dgrad_direct_cuda.cu). The
// CUDA dgrads (strict, WMMA, mma.sync) launch by it; the CPU's rounded backward under tf32/bf16
// (engine/ops/conv2d.cpp) keeps FP32 operands by it, so both round the same operands.
constexpr int64_t kFirstLayerDgradMaxC = 4;
constexpr int64_t kFirstLayerDgradMaxTaps = 2048;  // the direct kernel's filter chunk, in float4
inline bool dgrad_is_first_layer(const Conv2dShape& s) {
  return s.C <= kFirstLayerDgradMaxC && s.R * s.S <= kFirstLayerDgradMaxTaps;
}

// ---- reference: plain loops ----
// y = x * w (+ bias when bias != nullptr).
template <typename T>
void conv2d_fprop_cpu(const Conv2dShape& shape, const T* x, const T* w, const T* bias, T* y);
// dx from dy and w.
template <typename T>
void conv2d_dgrad_cpu(const Conv2dShape& shape, const T* dy, const T* w, T* dx);
// dw and db from dy and x; either output may be nullptr, and is then not computed.
template <typename T>
void conv2d_wgrad_cpu(const Conv2dShape& shape, const T* dy, const T* x, T* dw, T* db);

// ---- fast: im2col / col2im + Eigen GEMM, OpenMP over the batch ----
template <typename T>
void conv2d_fprop_fast_cpu(const Conv2dShape& shape, const T* x, const T* w, const T* bias, T* y);
template <typename T>
void conv2d_dgrad_fast_cpu(const Conv2dShape& shape, const T* dy, const T* w, T* dx);
template <typename T>
void conv2d_wgrad_fast_cpu(const Conv2dShape& shape, const T* dy, const T* x, T* dw, T* db);

// ---- CUDA, ours: implicit GEMM tiled through shared memory (conv2d_cuda.cu) ----
// The block tile's column count (the N side of each pass's GEMM: K for fprop and wgrad, C for
// dgrad). Every width gives the same bits (the same multiply-adds in the same order), except
// wgrad when the widths split its reduction into different numbers of chunks. Auto:
// conv2d_pick_tile on the current device. engine/backend.h chooses it for engine::conv2d
// (ENGINE_CONV_TILE); `dml bench` times each width.
enum class ConvTile { Auto, Cols128, Cols64, Cols32 };
enum class ConvPass { Fprop, Dgrad, Wgrad };
// 128, 64 or 32; Auto is an error (resolve it with conv2d_pick_tile first).
int conv2d_tile_columns(ConvTile tile);
// The width for `pass` on `shape` on a GPU of `multiprocessors` SMs, from counts alone (the rule
// and its reasons: conv2d_tiles.cpp). Never Auto.
ConvTile conv2d_pick_tile(ConvPass pass, const Conv2dShape& shape, int multiprocessors);

void conv2d_fprop_cuda(const Conv2dShape& shape, const float* x, const float* w, const float* bias,
                       float* y, ConvTile tile = ConvTile::Auto);
// dgrad with C <= 4 runs the direct kernel whatever `tile` says.
void conv2d_dgrad_cuda(const Conv2dShape& shape, const float* dy, const float* w, float* dx,
                       ConvTile tile = ConvTile::Auto);
// The same dgrad through the direct kernel (one thread per input pixel) that conv2d_dgrad_cuda
// uses for C <= 4, for any C <= 32 (and ceil(C / 4) R S <= 2048), so `dml bench` can time it
// against the GEMM where both apply; conv2d_dgrad_cuda keeps the GEMM for C > 4 until then.
void conv2d_dgrad_direct_cuda(const Conv2dShape& shape, const float* dy, const float* w, float* dx);
// wgrad splits its N P Q reduction across blocks and sums the partial dW in a second pass
// (deterministic); the partials need this many floats of device scratch (0: no split) for the
// same `tile`.
int64_t conv2d_wgrad_cuda_workspace_size(const Conv2dShape& shape, ConvTile tile = ConvTile::Auto);
// dw and/or db may be nullptr (not computed); `workspace` holds
// conv2d_wgrad_cuda_workspace_size(shape, tile) floats (may be nullptr when that is 0).
void conv2d_wgrad_cuda(const Conv2dShape& shape, const float* dy, const float* x, float* dw,
                       float* db, float* workspace, ConvTile tile = ConvTile::Auto);

// ---- CUDA, ours on tensor cores (conv2d_tensor_core_cuda.cu) ----
// The contracts above in the given precision: Fp32 is conv2d_*_cuda itself (its tile rule);
// Tf32 rounds both operands of every product to TF32 (cvt.rna), Bf16 to BF16 (round to nearest,
// ties to even), and multiplies on tensor cores with FP32 accumulation and FP32 outputs (one
// kernel body per pass for both); fprop's bias, wgrad's db and dgrad with C <= 4 (the direct
// kernel) stay FP32.
void conv2d_fprop_tensor_core_cuda(const Conv2dShape& shape, const float* x, const float* w,
                                   const float* bias, float* y, Precision precision);
void conv2d_dgrad_tensor_core_cuda(const Conv2dShape& shape, const float* dy, const float* w,
                                   float* dx, Precision precision);
// wgrad's split-K scratch for this precision (the tensor-core tile's count under Tf32 and Bf16),
// in floats.
int64_t conv2d_wgrad_tensor_core_cuda_workspace_size(const Conv2dShape& shape, Precision precision);
void conv2d_wgrad_tensor_core_cuda(const Conv2dShape& shape, const float* dy, const float* x,
                                   float* dw, float* db, float* workspace, Precision precision);

// ---- CUDA, cuDNN (conv2d_cudnn.cu): same contracts, in the cuDNN math type of `precision`
// (kernels/common/library_math.h): fp32 strict FP32 (no TF32 tensor cores), tf32 TF32 tensor
// cores allowed (PyTorch's default), bf16 BF16 operands and output with FP32 accumulation, the
// output widened back to FP32 (conv2d_cudnn.cu) ----
bool cudnn_available();  // false when built without cuDNN
// The cuDNN library loaded at run time, e.g. "9.19.0" (cudnnGetVersion); "" without cuDNN. For
// logs: cuDNN's algorithm choices and rounding differ between versions.
std::string cudnn_version();
void conv2d_fprop_cudnn(const Conv2dShape& shape, const float* x, const float* w, const float* bias,
                        float* y, Precision precision = Precision::Fp32);
void conv2d_dgrad_cudnn(const Conv2dShape& shape, const float* dy, const float* w, float* dx,
                        Precision precision = Precision::Fp32);
void conv2d_wgrad_cudnn(const Conv2dShape& shape, const float* dy, const float* x, float* dw,
                        float* db, Precision precision = Precision::Fp32);
// How conv2d_*_cudnn pick each pass's algorithm the first time a thread meets a shape under this
// setting (the pick is then kept for the shape, the setting and the precision): process-wide,
// in the call's precision either way.
//   Heuristic  cuDNN's ranking (cudnnGet*Algorithm_v7), deterministic algorithms first; times
//              nothing, so `--conv cudnn` runs are reproducible                       [default]
//   Fastest    every algorithm timed once on the call's own buffers (cudnnFind*AlgorithmEx) and
//              the fastest kept, deterministic or not: PyTorch's cudnn.benchmark = True, the
//              peer `dml bench` compares our kernels with
enum class CudnnAlgorithmChoice { Heuristic, Fastest };
void set_cudnn_algorithm_choice(CudnnAlgorithmChoice choice);
// The algorithms this thread chose for `shape` in `precision`, e.g. "fprop IMPLICIT_PRECOMP_GEMM,
// dgrad ALGO_1, wgrad FFT" (cuDNN's enum names without their prefix; "-" for a pass not run yet),
// for the benchmark table's notes and the tests' tolerances (FFT and Winograd round differently).
std::string conv2d_cudnn_algorithms(const Conv2dShape& shape,
                                    Precision precision = Precision::Fp32);

}  // namespace engine::kernels
