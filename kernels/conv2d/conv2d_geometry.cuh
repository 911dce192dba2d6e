// What conv2d's CUDA kernels share (conv2d_cuda.cu: the implicit GEMMs;
// conv2d_dgrad_direct_cuda.cu: dgrad one pixel per thread): the shape in 32-bit integers, checked
// once on the host, and the stride "phases" of dgrad. Internal to kernels/conv2d; the contracts are
// in conv2d.h.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/conv2d/conv2d.h"

namespace engine::kernels::conv2d_detail {

struct Geometry {  // Conv2dShape in 32-bit, plus derived sizes
  int N, C, H, W, K, R, S, P, Q;
  int sh, sw, ph, pw, dh, dw;
};

// The Conv2dShape as 32-bit Geometry, after checking what every kernel assumes (`op` names the
// caller in the error).
inline Geometry geometry(const Conv2dShape& s, const char* op) {
  const int64_t P = s.out_h(), Q = s.out_w();
  const int64_t largest =
      std::max({s.N * s.C * s.H * s.W, s.N * s.K * P * Q, s.K * s.C * s.R * s.S});
  // An empty filter bank would mean zero-block launches and, in wgrad's split count, a division by
  // zero; the engine never asks for one (engine/ops/conv2d.cpp), but the kernels say so too. An
  // empty batch (N = 0) is fine: the callers below return early (wgrad writes zero gradients).
  ENGINE_CHECK(s.N >= 0 && s.C >= 1 && s.K >= 1 && s.R >= 1 && s.S >= 1, op,
               ": C, K, R and S must be >= 1 (and N >= 0), got N=", s.N, " C=", s.C, " K=", s.K,
               " R=", s.R, " S=", s.S);
  ENGINE_CHECK(largest < INT_MAX && P >= 1 && Q >= 1, op, ": shape N=", s.N, " C=", s.C, " H=", s.H,
               " W=", s.W, " K=", s.K, " R=", s.R, " S=", s.S,
               " needs 64-bit indexing or has an empty output (P=", P, ", Q=", Q,
               "); the CUDA kernels index in 32 bits");
  Geometry g;
  g.N = int(s.N);
  g.C = int(s.C);
  g.H = int(s.H);
  g.W = int(s.W);
  g.K = int(s.K);
  g.R = int(s.R);
  g.S = int(s.S);
  g.P = int(P);
  g.Q = int(Q);
  g.sh = int(s.stride_h);
  g.sw = int(s.stride_w);
  g.ph = int(s.pad_h);
  g.pw = int(s.pad_w);
  g.dh = int(s.dilation_h);
  g.dw = int(s.dilation_w);
  return g;
}

inline unsigned blocks_for(int64_t n, int64_t tile) {
  return static_cast<unsigned>(ceil_div(n, tile));
}

// dgrad and strides (conv2d_cuda.cu's header): input pixel h only receives taps r with
// (h + ph - r dh) divisible by sh, so pixels are split into sh sw phases (h mod sh, w mod sw).
// The taps of one phase along one axis: r = first + j step, j < count, are exactly the r in
// [0, R) with (phase + pad - r dil) divisible by stride.
struct Taps {
  int first, step, count;
};

__device__ __forceinline__ Taps phase_taps(int phase, int pad, int dil, int stride, int R) {
  int a = stride, b = dil;  // gcd(stride, dil)
  while (b != 0) {
    const int t = a % b;
    a = b;
    b = t;
  }
  Taps taps{0, stride / a, 0};
  int r = 0;
  while (r < R && (phase + pad - r * dil) % stride != 0) ++r;
  taps.first = r;
  taps.count = r < R ? (R - 1 - r) / taps.step + 1 : 0;
  return taps;
}

// Pixels of a phase along one axis: phase, phase + stride, ... below `size`.
__device__ __forceinline__ int phase_extent(int phase, int stride, int size) {
  return phase < size ? (size - phase + stride - 1) / stride : 0;
}

// conv2d_dgrad_cuda hands dgrad to the direct kernel when C <= kDirectDgradDefaultMaxC (a first
// layer; the GEMM's 128-column tile would be mostly zeros), conv2d_dgrad_direct_cuda takes any
// C <= kDirectDgradMaxC; both need ceil(C / 4) R S <= kDirectDgradFilterTaps (one filter chunk
// in shared memory holds at least one output channel).
constexpr int kDirectDgradDefaultMaxC = 4;
constexpr int kDirectDgradMaxC = 32;
constexpr int kDirectDgradFilterTaps = 2048;  // float4 per chunk: 32 KiB of shared memory

// dgrad's grid has one z-slice per phase: sh sw of them, at most 65535 (both dgrad paths).
inline void check_dgrad_phases(const Geometry& g, const char* op) {
  ENGINE_CHECK(g.sh * g.sw <= 65535, op, ": stride ", g.sh, "x", g.sw, " gives too many phases");
}

// Launches the direct dgrad kernel (conv2d_dgrad_direct_cuda.cu) on a Geometry its caller has
// checked (C <= kDirectDgradMaxC, ceil(C / 4) R S <= kDirectDgradFilterTaps, N H W > 0, the
// phases); `op` names the caller in a launch error.
void launch_dgrad_direct(const Geometry& g, const float* dy, const float* w, float* dx,
                         const char* op);

}  // namespace engine::kernels::conv2d_detail
