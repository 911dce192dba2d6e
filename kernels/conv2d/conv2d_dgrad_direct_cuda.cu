// conv2d dgrad on CUDA, direct: one thread per input pixel, for few input channels.
//
// Why: the implicit-GEMM dgrad (conv2d_cuda.cu) gives each block 128 columns of C. With C = 1
// (C2F2 on Fashion-MNIST) or C = 3 (RGB ResNets) all but 1 or 3 of them multiply zeros, 128x or
// 43x the useful work, in the pass an attack runs at every PGD step for the input gradient
// (H200, 2026-11-27: ResNet-18 conv1 dgrad 46.7 ms against cuDNN's 1.7 ms).
//
// Math (conv2d.h; x NCHW, w KCRS, dy NKPQ):
//   dx[n, c, h, w] = sum over k and the phase's taps (r, s) of dy[n, k, p, q] w[k, c, r, s],
//   p = (h + ph - r dh) / sh, q = (w + pw - s dw) / sw (exact divisions, by the phase).
// Parallelization: one thread per input pixel computes its C values; threads are grouped by
// phase (blockIdx.z, as in the GEMM), so a block shares one tap set and only the image border
// differs between its threads. The filters are staged in shared memory a chunk of output
// channels at a time, as G = ceil(C / 4) float4 per tap (c padded to a multiple of 4 by zeros):
// G broadcast 16-byte shared reads per tap. Summation order per output: k, then r, then s.
// kMaxC (4 or 32, the two instantiations) sizes the accumulators: float4 acc[kMaxC / 4] in
// registers.
// Use: conv2d_dgrad_cuda and conv2d_dgrad_tensor_core_cuda take this kernel for C <= 4
// (launch_dgrad_direct_for_first_layer); conv2d_dgrad_direct_cuda runs it for any
// C <= 32, so that `dml bench` can time it against the GEMM at C = 32 (C2F2's conv2) before it is
// chosen for such shapes.
// Cost: 2 N C K R S H W / (sh sw) FLOPs useful, of 8 G N K R S H W / (sh sw) issued. Per tap one
// 4-byte global read of dy (neighbouring threads read neighbouring q, and the R S / (sh sw)
// pixels that share a dy value find it in L1/L2), G shared reads and 4 G FFMA: for G = 1 bound
// by load issue, not FLOPs. Memory floor as the GEMM's: 4 (N K P Q + K C R S + N C H W) bytes.
#include "kernels/common/device_counters.h"
#include "kernels/conv2d/conv2d_geometry.cuh"

namespace engine::kernels {

using namespace conv2d_detail;

namespace {

constexpr int kThreads = 256;

template <int kMaxC>
__global__ void __launch_bounds__(kThreads)
    conv2d_dgrad_direct_kernel(Geometry g, const float* __restrict__ dy,
                               const float* __restrict__ w, float* __restrict__ dx) {
  constexpr int kMaxGroups = kMaxC / 4;
  __shared__ float4 filters[kDirectDgradFilterTaps];
  const int phase_h = blockIdx.z / g.sw, phase_w = blockIdx.z % g.sw;
  const int Hp = phase_extent(phase_h, g.sh, g.H), Wp = phase_extent(phase_w, g.sw, g.W);
  const int M = g.N * Hp * Wp;
  if (int(blockIdx.x) * kThreads >= M) return;  // whole block, before any barrier
  const Taps tr = phase_taps(phase_h, g.ph, g.dh, g.sh, g.R);
  const Taps ts = phase_taps(phase_w, g.pw, g.dw, g.sw, g.S);

  // This thread's pixel m = (n, i, j): h = phase_h + i sh, w = phase_w + j sw.
  const int m = blockIdx.x * kThreads + threadIdx.x;
  const bool valid = m < M;
  const int n_img = valid ? m / (Hp * Wp) : 0;
  const int ij = valid ? m - n_img * Hp * Wp : 0;
  const int h = phase_h + (ij / Wp) * g.sh, wx = phase_w + (ij % Wp) * g.sw;

  // The host checked C <= kMaxC and G R S <= kDirectDgradFilterTaps, so kc >= 1.
  // (groups is a constant 1 in the <4> instantiation, which keeps its loops free of run-time
  // bounds: with a run-time 1 ptxas spilled.)
  const int RS = g.R * g.S, groups = kMaxGroups == 1 ? 1 : (g.C + 3) / 4;
  const int kc = kDirectDgradFilterTaps / (groups * RS);
  float4 acc[kMaxGroups];
#pragma unroll
  for (int j = 0; j < kMaxGroups; ++j) acc[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int k0 = 0; k0 < g.K; k0 += kc) {
    const int chunk = min(kc, g.K - k0);
    __syncthreads();  // every thread is done with the previous chunk's filters
    // filters[(kk R S + rs) G + j] = w[k0 + kk, 4 j .. 4 j + 3, rs] (zeros past C).
    for (int i = threadIdx.x; i < chunk * RS * groups; i += kThreads) {
      const int kk = i / (RS * groups), rest = i - kk * RS * groups;
      const int rs = rest / groups, c0 = 4 * (rest - rs * groups);
      const float* tap = w + ((k0 + kk) * g.C + c0) * RS + rs;  // w[k, c0 + l, rs] = tap[l R S]
      filters[i] =
          make_float4(tap[0], c0 + 1 < g.C ? tap[RS] : 0.0f, c0 + 2 < g.C ? tap[2 * RS] : 0.0f,
                      c0 + 3 < g.C ? tap[3 * RS] : 0.0f);
    }
    __syncthreads();
    if (!valid) continue;  // (still reaches the next chunk's barriers)
    for (int kk = 0; kk < chunk; ++kk) {
      const float* plane = dy + (n_img * g.K + k0 + kk) * g.P * g.Q;
      for (int a = 0; a < tr.count; ++a) {
        const int r = tr.first + a * tr.step;
        const int p = (h + g.ph - r * g.dh) / g.sh;  // exact: negative iff the numerator is
        if (p < 0 || p >= g.P) continue;
        for (int b = 0; b < ts.count; ++b) {
          const int s = ts.first + b * ts.step;
          const int q = (wx + g.pw - s * g.dw) / g.sw;
          if (q < 0 || q >= g.Q) continue;
          const float v = plane[p * g.Q + q];
          const float4* f = &filters[(kk * RS + r * g.S + s) * groups];
#pragma unroll
          for (int j = 0; j < kMaxGroups; ++j) {
            if (j < groups) {
              const float4 fj = f[j];
              acc[j].x = fmaf(v, fj.x, acc[j].x);
              acc[j].y = fmaf(v, fj.y, acc[j].y);
              acc[j].z = fmaf(v, fj.z, acc[j].z);
              acc[j].w = fmaf(v, fj.w, acc[j].w);
            }
          }
        }
      }
    }
  }
  if (!valid) return;
  // dx[n, c, h, w] = out[c H W]; a phase without taps writes zeros, as the GEMM does.
  float* out = dx + (n_img * g.C * g.H + h) * g.W + wx;
  const int HW = g.H * g.W;
#pragma unroll
  for (int j = 0; j < kMaxGroups; ++j) {
    const int c0 = 4 * j;
    if (c0 < g.C) out[c0 * HW] = acc[j].x;
    if (c0 + 1 < g.C) out[(c0 + 1) * HW] = acc[j].y;
    if (c0 + 2 < g.C) out[(c0 + 2) * HW] = acc[j].z;
    if (c0 + 3 < g.C) out[(c0 + 3) * HW] = acc[j].w;
  }
}

}  // namespace

void conv2d_detail::launch_dgrad_direct(const Geometry& g, const float* dy, const float* w,
                                        float* dx, const char* op) {
  const int64_t rows = int64_t(g.N) * ceil_div(g.H, g.sh) * ceil_div(g.W, g.sw);
  const dim3 grid(blocks_for(rows, kThreads), 1, g.sh * g.sw);
  if (g.C <= kDirectDgradDefaultMaxC) {
    conv2d_dgrad_direct_kernel<kDirectDgradDefaultMaxC>
        <<<grid, kThreads, 0, current_stream()>>>(g, dy, w, dx);
  } else {
    conv2d_dgrad_direct_kernel<kDirectDgradMaxC>
        <<<grid, kThreads, 0, current_stream()>>>(g, dy, w, dx);
  }
  CUDA_CHECK_LAUNCH(op, " (direct kernel) N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K,
                    " R=", g.R, " S=", g.S);
}

bool conv2d_detail::launch_dgrad_direct_for_first_layer(const Conv2dShape& shape, const Geometry& g,
                                                        const float* dy, const float* w, float* dx,
                                                        const char* op) {
  if (!dgrad_is_first_layer(shape)) return false;
  describe_next_launch({"conv2d_dgrad_direct", conv2d_flops(shape), conv2d_bytes(shape)});
  launch_dgrad_direct(g, dy, w, dx, op);
  return true;
}

void conv2d_dgrad_direct_cuda(const Conv2dShape& shape, const float* dy, const float* w,
                              float* dx) {
  const char* op = "conv2d_dgrad_direct_cuda";
  const Geometry g = geometry(shape, op);
  ENGINE_CHECK(g.C <= kDirectDgradMaxC && (g.C + 3) / 4 * g.R * g.S <= kDirectDgradFilterTaps, op,
               ": needs C <= ", kDirectDgradMaxC,
               " and ceil(C / 4) R S <= ", kDirectDgradFilterTaps, ", got C=", g.C, " R=", g.R,
               " S=", g.S);
  if (g.N == 0 || g.H == 0 || g.W == 0) return;
  check_dgrad_phases(g, op);
  launch_dgrad_direct(g, dy, w, dx, op);
}

}  // namespace engine::kernels
