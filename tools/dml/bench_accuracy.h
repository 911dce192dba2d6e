// The error column of `dml bench`'s GEMM and convolution rows: each output of ours and of the
// peer, in the row's precision, against an f64 sum on the CPU over the same f32 inputs.
// Header-only, like bench_table.h, so tests/tools/bench_test.cpp checks it without a GPU.
//
// Sampled: the benchmark's shapes are too large for a whole f64 reference (a ResNet-18 wgrad
// is ~10^11 multiply-adds per layer), so kErrorSamples outputs spread evenly over the output
// (position i * total / kErrorSamples) are computed, each from the definition: an f64 sum of its
// terms in plain loops, independent of every kernel.
//
// Relative error of one output y against its reference r = sum_t a_t b_t:
//   |y - r| / sum_t |a_t b_t|
// the scale every rounding error of a sum is proportional to (a plain |y - r| / |r| is unbounded
// for the zero-mean inputs the bench uses, whose sums can cancel to ~0). Strict FP32 sums reach
// ~1e-7 .. 1e-5 on it, TF32 operands ~1e-4 (2^-11 per operand), BF16 ~1e-3 (2^-8). The row's
// figure is the maximum over the samples; an output whose terms are all zero counts 0 when it
// is exactly 0, else infinity.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "kernels/conv2d/conv2d.h"

namespace dml::bench {

constexpr int64_t kErrorSamples = 256;

// An f64 sum and the sum of the magnitudes of its terms.
struct Reference {
  double value = 0.0;
  double magnitude = 0.0;
  void add(double a, double b) {
    value += a * b;
    magnitude += std::fabs(a * b);
  }
};

// min(count, total) distinct positions spread over [0, total): i * total / count.
inline std::vector<int64_t> sample_positions(int64_t total, int64_t count) {
  std::vector<int64_t> positions;
  const int64_t n = std::min(total, count);
  for (int64_t i = 0; i < n; ++i) positions.push_back(i * total / n);
  return positions;
}

inline double relative_error(double got, const Reference& r) {
  const double difference = std::fabs(got - r.value);
  if (r.magnitude == 0.0) return difference == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return difference / r.magnitude;
}

// The row's two error figures: ours, and the peer's (unset when it did not run).
struct SampledErrors {
  double ours = 0.0;
  std::optional<double> peer;
};

// The largest relative error of `ours` and of `peer` (when not empty) over the kErrorSamples
// positions sample_positions spreads over the output, the reference of output `index` being
// reference(index): the one sampling loop of every GEMM and convolution row.
inline SampledErrors sampled_errors(const std::vector<float>& ours, const std::vector<float>& peer,
                                    const std::function<Reference(int64_t)>& reference) {
  SampledErrors errors;
  if (!peer.empty()) errors.peer = 0.0;
  for (int64_t index : sample_positions(int64_t(ours.size()), kErrorSamples)) {
    const Reference r = reference(index);
    errors.ours = std::max(errors.ours, relative_error(ours[size_t(index)], r));
    if (errors.peer) errors.peer = std::max(*errors.peer, relative_error(peer[size_t(index)], r));
  }
  return errors;
}

// C = A B for row-major A [m, k], B [k, n]: element `index` of C (= i n + j).
inline Reference gemm_reference(int64_t n, int64_t k, const float* a, const float* b,
                                int64_t index) {
  const int64_t i = index / n, j = index % n;
  Reference r;
  for (int64_t p = 0; p < k; ++p) r.add(a[i * k + p], b[p * n + j]);
  return r;
}

// fprop, y [N, K, P, Q] = sum over c, r, s of x [N, C, H, W] at (p stride - pad + r dilation,
// q stride - pad + s dilation) times w [K, C, R, S]: element `index` of y.
inline Reference conv_fprop_reference(const engine::kernels::Conv2dShape& s, const float* x,
                                      const float* w, int64_t index) {
  const int64_t P = s.out_h(), Q = s.out_w();
  const int64_t q = index % Q, p = index / Q % P, k = index / (Q * P) % s.K,
                n = index / (Q * P * s.K);
  Reference r;
  for (int64_t c = 0; c < s.C; ++c) {
    for (int64_t fr = 0; fr < s.R; ++fr) {
      const int64_t h = p * s.stride_h - s.pad_h + fr * s.dilation_h;
      if (h < 0 || h >= s.H) continue;
      for (int64_t fs = 0; fs < s.S; ++fs) {
        const int64_t wi = q * s.stride_w - s.pad_w + fs * s.dilation_w;
        if (wi < 0 || wi >= s.W) continue;
        r.add(x[((n * s.C + c) * s.H + h) * s.W + wi], w[((k * s.C + c) * s.R + fr) * s.S + fs]);
      }
    }
  }
  return r;
}

// dgrad, dx [N, C, H, W]: every output position (p, q) and filter tap (r, s) that read x at
// (h, w) in fprop contributes dy [N, K, P, Q] times w: element `index` of dx.
inline Reference conv_dgrad_reference(const engine::kernels::Conv2dShape& s, const float* dy,
                                      const float* w, int64_t index) {
  const int64_t P = s.out_h(), Q = s.out_w();
  const int64_t wi = index % s.W, h = index / s.W % s.H, c = index / (s.W * s.H) % s.C,
                n = index / (s.W * s.H * s.C);
  Reference r;
  for (int64_t k = 0; k < s.K; ++k) {
    for (int64_t fr = 0; fr < s.R; ++fr) {
      const int64_t p_stride = h + s.pad_h - fr * s.dilation_h;  // = p stride_h
      if (p_stride < 0 || p_stride % s.stride_h != 0 || p_stride / s.stride_h >= P) continue;
      const int64_t p = p_stride / s.stride_h;
      for (int64_t fs = 0; fs < s.S; ++fs) {
        const int64_t q_stride = wi + s.pad_w - fs * s.dilation_w;
        if (q_stride < 0 || q_stride % s.stride_w != 0 || q_stride / s.stride_w >= Q) continue;
        const int64_t q = q_stride / s.stride_w;
        r.add(dy[((n * s.K + k) * P + p) * Q + q], w[((k * s.C + c) * s.R + fr) * s.S + fs]);
      }
    }
  }
  return r;
}

// wgrad, dw [K, C, R, S] = sum over n, p, q of dy [N, K, P, Q] times the x that tap (r, s) read:
// element `index` of dw.
inline Reference conv_wgrad_reference(const engine::kernels::Conv2dShape& s, const float* dy,
                                      const float* x, int64_t index) {
  const int64_t P = s.out_h(), Q = s.out_w();
  const int64_t fs = index % s.S, fr = index / s.S % s.R, c = index / (s.S * s.R) % s.C,
                k = index / (s.S * s.R * s.C);
  Reference r;
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t p = 0; p < P; ++p) {
      const int64_t h = p * s.stride_h - s.pad_h + fr * s.dilation_h;
      if (h < 0 || h >= s.H) continue;
      for (int64_t q = 0; q < Q; ++q) {
        const int64_t wi = q * s.stride_w - s.pad_w + fs * s.dilation_w;
        if (wi < 0 || wi >= s.W) continue;
        r.add(dy[((n * s.K + k) * P + p) * Q + q], x[((n * s.C + c) * s.H + h) * s.W + wi]);
      }
    }
  }
  return r;
}

}  // namespace dml::bench
