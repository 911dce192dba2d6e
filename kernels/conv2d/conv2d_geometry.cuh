// What conv2d's CUDA kernels share (conv2d_cuda.cu: the FP32 implicit GEMMs;
// conv2d_tensor_core_cuda.cu: the TF32 ones; conv2d_dgrad_direct_cuda.cu: dgrad one pixel per
// thread): the shape in 32-bit integers, checked once on the host, the stride "phases" of dgrad,
// and the implicit GEMMs' index math (where element (m, k) of each pass's A and B comes from:
// the table in conv2d_cuda.cu's header). Internal to kernels/conv2d; the contracts are in
// conv2d.h.
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

// ---- the implicit GEMMs' operands (conv2d_cuda.cu's table), one definition for every tile ----

// fprop's A row m = (n, p, q): the image's offset in x and the top-left input pixel of its
// window (before dilation and padding are applied per tap).
struct FpropRow {
  bool valid;  // m < N P Q
  int x_image, h_base, w_base;
};

__device__ __forceinline__ FpropRow fprop_row(const Geometry& g, int m) {
  FpropRow row;
  row.valid = m < g.N * g.P * g.Q;
  const int n_img = row.valid ? m / (g.P * g.Q) : 0;
  const int pq = row.valid ? m - n_img * g.P * g.Q : 0;
  row.x_image = n_img * g.C * g.H * g.W;
  row.h_base = (pq / g.Q) * g.sh - g.ph;
  row.w_base = (pq % g.Q) * g.sw - g.pw;
  return row;
}

// fprop's A[m, k], k = (c, r, s): x[n, c, p sh - ph + r dh, q sw - pw + s dw]; zero for padding,
// for k >= k_end and for a row past the end. fprop_a_offset gives the element's offset in x, or
// -1 where A is zero (for copies that fill zeros themselves, conv2d_mma_cuda.cu's cp.async).
__device__ __forceinline__ int fprop_a_offset(const Geometry& g, const FpropRow& row, int k,
                                              int k_end) {
  const int RS = g.R * g.S;
  const int c = k / RS, rs = k - c * RS;
  const int r = rs / g.S, s = rs - r * g.S;
  const int h = row.h_base + r * g.dh, w = row.w_base + s * g.dw;
  const bool inside = row.valid && k < k_end && h >= 0 && h < g.H && w >= 0 && w < g.W;
  return inside ? row.x_image + (c * g.H + h) * g.W + w : -1;
}

__device__ __forceinline__ float fprop_a(const Geometry& g, const float* __restrict__ x,
                                         const FpropRow& row, int k, int k_end) {
  const int offset = fprop_a_offset(g, row, k, k_end);
  return offset >= 0 ? x[offset] : 0.0f;
}

// dgrad's phase (blockIdx.z = phase_h sw + phase_w): its pixels' extent and its valid taps.
struct DgradPhase {
  int h, w;    // the phase: pixels h = phase.h + i sh, w = phase.w + j sw
  int Hp, Wp;  // pixels of the phase along each axis
  Taps tr, ts;
  int taps;  // tr.count ts.count: the reduction is (kout, tap), K taps long
};

__device__ __forceinline__ DgradPhase dgrad_phase(const Geometry& g, int z) {
  DgradPhase phase;
  phase.h = z / g.sw;
  phase.w = z % g.sw;
  phase.Hp = phase_extent(phase.h, g.sh, g.H);
  phase.Wp = phase_extent(phase.w, g.sw, g.W);
  phase.tr = phase_taps(phase.h, g.ph, g.dh, g.sh, g.R);
  phase.ts = phase_taps(phase.w, g.pw, g.dw, g.sw, g.S);
  phase.taps = phase.tr.count * phase.ts.count;
  return phase;
}

// dgrad's A row m = (n, i, j) of a phase: the input pixel (n, h, w) it computes.
struct DgradRow {
  bool valid;  // m < N Hp Wp
  int n_img, h, w;
};

__device__ __forceinline__ DgradRow dgrad_row(const Geometry& g, const DgradPhase& phase, int m) {
  DgradRow row;
  row.valid = m < g.N * phase.Hp * phase.Wp;
  row.n_img = row.valid ? m / (phase.Hp * phase.Wp) : 0;
  const int ij = row.valid ? m - row.n_img * phase.Hp * phase.Wp : 0;
  row.h = phase.h + (ij / phase.Wp) * g.sh;
  row.w = phase.w + (ij % phase.Wp) * g.sw;
  return row;
}

// dgrad's reduction index k = (kout, tap) as the output channel and the filter tap (r, s).
struct DgradTap {
  int kout, r, s;
};

__device__ __forceinline__ DgradTap dgrad_tap(const DgradPhase& phase, int k) {
  DgradTap tap;
  tap.kout = k / phase.taps;
  const int t = k - tap.kout * phase.taps;
  tap.r = phase.tr.first + (t / phase.ts.count) * phase.tr.step;
  tap.s = phase.ts.first + (t % phase.ts.count) * phase.ts.step;
  return tap;
}

// dgrad's A[m, k]: dy[n, kout, p, q] with p = (h + ph - r dh) / sh and q likewise, divisions
// exact (the phase guarantees it, so p < 0 iff the numerator is); zero outside dy, for !k_valid
// and for a row past the end.
// dgrad_a_offset: the element's offset in dy, or -1 where A is zero.
__device__ __forceinline__ int dgrad_a_offset(const Geometry& g, const DgradRow& row,
                                              const DgradTap& tap, bool k_valid) {
  const int p = (row.h + g.ph - tap.r * g.dh) / g.sh, q = (row.w + g.pw - tap.s * g.dw) / g.sw;
  const bool inside = row.valid && k_valid && p >= 0 && p < g.P && q >= 0 && q < g.Q;
  return inside ? ((row.n_img * g.K + tap.kout) * g.P + p) * g.Q + q : -1;
}

__device__ __forceinline__ float dgrad_a(const Geometry& g, const float* __restrict__ dy,
                                         const DgradRow& row, const DgradTap& tap, bool k_valid) {
  const int offset = dgrad_a_offset(g, row, tap, k_valid);
  return offset >= 0 ? dy[offset] : 0.0f;
}

// dgrad's B[k, c] = w[kout, c, r, s]; zero unless `valid` (k < K taps and c < C).
// dgrad_b_offset: the element's offset in w, or -1 where B is zero.
__device__ __forceinline__ int dgrad_b_offset(const Geometry& g, const DgradTap& tap, int c,
                                              bool valid) {
  return valid ? ((tap.kout * g.C + c) * g.R + tap.r) * g.S + tap.s : -1;
}

__device__ __forceinline__ float dgrad_b(const Geometry& g, const float* __restrict__ w,
                                         const DgradTap& tap, int c, bool valid) {
  const int offset = dgrad_b_offset(g, tap, c, valid);
  return offset >= 0 ? w[offset] : 0.0f;
}

// wgrad's A row (c, r, s) (dW transposed): the channel's offset in an image of x and the tap's
// offsets from the window's corner.
struct WgradRow {
  bool valid;  // row < C R S
  int x_channel, r_off, s_off;
};

__device__ __forceinline__ WgradRow wgrad_row(const Geometry& g, int crs) {
  const int RS = g.R * g.S;
  const int c = crs / RS, rs = crs - c * RS;
  return WgradRow{crs < g.C * RS, c * g.H * g.W, (rs / g.S) * g.dh, (rs % g.S) * g.dw};
}

// wgrad's reduction index k = (n, p, q), below k_end: the output pixel and its window's corner.
struct WgradStep {
  bool valid;  // k < k_end
  int n_img, pq, h0, w0, x_image;
};

__device__ __forceinline__ WgradStep wgrad_step(const Geometry& g, int k, int k_end) {
  WgradStep step;
  const int PQ = g.P * g.Q;
  step.valid = k < k_end;
  step.n_img = step.valid ? k / PQ : 0;
  step.pq = step.valid ? k - step.n_img * PQ : 0;
  step.h0 = (step.pq / g.Q) * g.sh - g.ph;
  step.w0 = (step.pq % g.Q) * g.sw - g.pw;
  step.x_image = step.n_img * g.C * g.H * g.W;
  return step;
}

// wgrad's A[(c, r, s), (n, p, q)] = x[n, c, p sh - ph + r dh, q sw - pw + s dw], zero for padding
// and outside the rows or the chunk.
// wgrad_a_offset: the element's offset in x, or -1 where A is zero.
__device__ __forceinline__ int wgrad_a_offset(const Geometry& g, const WgradStep& step,
                                              const WgradRow& row) {
  const int hh = step.h0 + row.r_off, ww = step.w0 + row.s_off;
  const bool inside = step.valid && row.valid && hh >= 0 && hh < g.H && ww >= 0 && ww < g.W;
  return inside ? step.x_image + row.x_channel + hh * g.W + ww : -1;
}

__device__ __forceinline__ float wgrad_a(const Geometry& g, const float* __restrict__ x,
                                         const WgradStep& step, const WgradRow& row) {
  const int offset = wgrad_a_offset(g, step, row);
  return offset >= 0 ? x[offset] : 0.0f;
}

// wgrad's B[(n, p, q), kout] = dy[n, kout, p, q], zero outside K or the chunk. wgrad_b_offset:
// the element's offset in dy, or -1 where B is zero.
__device__ __forceinline__ int wgrad_b_offset(const Geometry& g, const WgradStep& step, int kout) {
  return step.valid && kout < g.K ? (step.n_img * g.K + kout) * (g.P * g.Q) + step.pq : -1;
}

__device__ __forceinline__ float wgrad_b(const Geometry& g, const float* __restrict__ dy,
                                         const WgradStep& step, int kout) {
  const int offset = wgrad_b_offset(g, step, kout);
  return offset >= 0 ? dy[offset] : 0.0f;
}

// conv2d_dgrad_cuda hands dgrad to the direct kernel when C <= kDirectDgradDefaultMaxC (a first
// layer; the GEMM's 128-column tile would be mostly zeros), conv2d_dgrad_direct_cuda takes any
// C <= kDirectDgradMaxC; both need ceil(C / 4) R S <= kDirectDgradFilterTaps (one filter chunk
// in shared memory holds at least one output channel).
constexpr int kDirectDgradDefaultMaxC = int(kFirstLayerDgradMaxC);  // conv2d.h's first-layer rule
constexpr int kDirectDgradMaxC = 32;
constexpr int kDirectDgradFilterTaps = int(kFirstLayerDgradMaxTaps);  // float4: 32 KiB of smem

// dgrad's grid has one z-slice per phase: sh sw of them, at most 65535 (both dgrad paths).
inline void check_dgrad_phases(const Geometry& g, const char* op) {
  ENGINE_CHECK(g.sh * g.sw <= 65535, op, ": stride ", g.sh, "x", g.sw, " gives too many phases");
}

// Launches the direct dgrad kernel (conv2d_dgrad_direct_cuda.cu) on a Geometry its caller has
// checked (C <= kDirectDgradMaxC, ceil(C / 4) R S <= kDirectDgradFilterTaps, N H W > 0, the
// phases); `op` names the caller in a launch error.
void launch_dgrad_direct(const Geometry& g, const float* dy, const float* w, float* dx,
                         const char* op);

// The first-layer rule every dgrad launcher (conv2d_dgrad_cuda, conv2d_dgrad_tensor_core_cuda,
// conv2d_dgrad_mma_cuda) follows: when dgrad_is_first_layer(shape) (conv2d.h) it describes and
// launches the direct FP32 kernel and returns true; otherwise it launches nothing and returns
// false. Same preconditions on g as
// launch_dgrad_direct, save the C bound it checks itself.
bool launch_dgrad_direct_for_first_layer(const Conv2dShape& shape, const Geometry& g,
                                         const float* dy, const float* w, float* dx,
                                         const char* op);

// wgrad's split-K second pass (conv2d_cuda.cu): dw[i] = sum over s = 0, 1, ... of
// partial[s total + i], in that order, for i < total.
void launch_sum_splits(const float* partial, int splits, int total, float* dw);

}  // namespace engine::kernels::conv2d_detail
