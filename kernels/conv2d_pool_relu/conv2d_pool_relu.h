// conv2d_pool_relu: a C2F2 block, conv + bias, 2x2 / stride-2 max-pool, ReLU, in one forward
// kernel (issue 32, deliverable 3a). C2F2 pools before its ReLU (models/c2f2.cpp: the same
// function as ReLU-then-pool, a quarter of the ReLU), and so does this op.
//
// Math (conv2d.h's shape; pool2d.h's max rule; unary.h's relu):
//   z[n,k,p,q]  = b[k] + sum_{c,r,s} x[n,c,p sh-ph+r dh, q sw-pw+s dw] w[k,c,r,s]   [N, K, P, Q]
//   m[n,k,i,j]  = max over the window rows 2i, 2i+1 x columns 2j, 2j+1 of z        [N, K, P2, Q2]
//   y[n,k,i,j]  = relu(m) = (m < 0 ? 0 : m)           P2 = floor(P / 2), Q2 = floor(Q / 2)
//   window[n,k,i,j] = the cell of z the gradient of y goes to: 2 (row in window) + (column in
//     window) of the FIRST maximal cell in row-major order (a NaN counts as the maximum: the
//     pool's rule), or kNoGradient when relu passes nothing (m > 0 is false, relu'(0) = 0).
//   backward: dz[n,k,p,q] = dy[n,k,p/2,q/2] if window says (p, q), else 0 (an odd last row or
//     column of z is in no window: 0); then dx, dw, db are conv2d's dgrad and wgrad of dz.
//
// Backward choice: a cheap "unpool" kernel writes dz at conv resolution and the existing conv2d
// dgrad/wgrad kernels run on it unchanged. The alternative, dgrad's tile loader reading dy
// through window directly, saves writing and reading dz (conv1 below: 25.7 MB of 60.2 MB of an
// attack pass's backward; conv2: 12.8 of 36.3), but it would have to be written into three
// dgrad implementations (the implicit-GEMM tile, the direct kernel for C <= 4, cuDNN's, which
// cannot be changed), and training's wgrad needs dz at conv resolution anyway. It is the next
// step once a GPU has timed this one (the unpool is a pure memory pass: 34 + 17 MB ~ 12 us on
// an H200).
//
// The window index is what makes one forward kernel enough: the unfused backward recomputes the
// argmax from z (so it keeps z, 4x the pooled size, alive) and applies relu's mask from m.
//
// Layout: x NCHW, w KCRS, b [K] (or nullptr), y and window [N, K, P2, Q2], dz [N, K, P, Q];
// contiguous; window is one byte per pooled element.
//
// Implementations with identical arguments:
//   *_cpu (T = float, double): the reference, and it IS the composition of the unfused CPU
//     reference ops: conv2d_fprop_cpu, max_pool2d_forward_cpu, unary_cpu(Relu); window is found
//     by routing relu's gradient of ones back through max_pool2d_backward_cpu (the one cell of
//     each window that receives it). The unpool is the definition of window above.
//   *_cuda (f32, device pointers, current stream):
//     forward: one thread per pooled output (grid-stride over N K P2 Q2); it computes the 4 conv
//       values of its window with 4 accumulators, each an fmaf chain over (c, r, s) in ascending
//       order from 0 with padding taps multiplying 0 and then + b[k]: the order of
//       conv2d_fprop_cuda's GEMM (gemm_tile's multiply_stage), so z, y and window are bit for
//       bit the unfused CUDA ops'. A direct kernel: right for conv1 (C R S = 25), ~20x short of
//       the GEMM tile's FLOP rate on conv2 (C R S = 800) by register reuse; a pooling epilogue
//       on the implicit-GEMM tile is the fast version for conv2 (its rows would have to be
//       ordered window by window), to be timed against this one on a GPU.
//     unpool: one thread per dz cell, a gather (no zeroing pass, no atomics).
//
// Cost at C2F2's shapes, N = 256 (Fashion-MNIST 28x28), 4-byte floats, each tensor touched once;
// an attack pass = forward + input-gradient backward (MB = 10^6 bytes):
//   conv1 (1 -> 32, 5x5, 28x28 -> pooled 14x14):
//     unfused forward:  conv 26.5 (x 0.8, w, write z 25.7) + pool 32.1 (z, m) + relu 12.8 = 71.4
//     fused forward:    x 0.8 + w + y 6.4 + window 1.6                                     =  8.8
//     unfused backward: relu 19.3 (dy, m, dm) + pool 57.8 (z, dm, dz) + dgrad 26.5 = 103.6
//     fused backward:   unpool 33.7 (dy 6.4, window 1.6, dz 25.7) + dgrad 26.5         =  60.2
//   conv2 (32 -> 64, 5x5, 14x14 -> pooled 7x7):
//     unfused forward:  conv 19.5 + pool 16.1 + relu 6.4 = 42.0;  fused: 10.6
//     unfused backward: relu 9.6 + pool 28.9 + dgrad 19.5 = 58.0; fused: unpool 16.9 + 19.5 = 36.3
//   Both blocks, one attack pass: 275 MB unfused -> 116 MB fused (-58 %), 12 kernels -> 6
//   (forward 3 -> 1 per block, backward 3 -> 2); a loader-fused dgrad would make it 39 MB.
//   FLOPs are the conv's, unchanged: 2 N K P Q C R S (conv1 0.32 GFLOP, conv2 5.1 GFLOP), plus
//   3 compares per pooled output.
#pragma once

#include <cstdint>

#include "kernels/conv2d/conv2d.h"
#include "kernels/pool/pool.h"

namespace engine::kernels {

// window value of a pooled output whose ReLU passes no gradient.
constexpr uint8_t kNoGradient = 255;

// The pool of the op: 2x2 windows, stride 2, no padding, over z [N, K, P, Q].
inline Pool2dShape conv2d_pool_relu_pool_shape(const Conv2dShape& shape) {
  Pool2dShape pool;
  pool.N = shape.N;
  pool.C = shape.K;
  pool.H = shape.out_h();
  pool.W = shape.out_w();
  return pool;  // kernel, stride 2x2, pad 0: Pool2dShape's defaults
}

// y [N, K, P2, Q2] and window [N, K, P2, Q2]; bias may be nullptr. Callers check P2, Q2 >= 1.
template <typename T>
void conv2d_pool_relu_forward_cpu(const Conv2dShape& shape, const T* x, const T* w, const T* bias,
                                  T* y, uint8_t* window);
// dz [N, K, P, Q] from dy [N, K, P2, Q2] and the forward's window.
template <typename T>
void conv2d_pool_relu_unpool_cpu(const Conv2dShape& shape, const T* dy, const uint8_t* window,
                                 T* dz);

void conv2d_pool_relu_forward_cuda(const Conv2dShape& shape, const float* x, const float* w,
                                   const float* bias, float* y, uint8_t* window);
void conv2d_pool_relu_unpool_cuda(const Conv2dShape& shape, const float* dy, const uint8_t* window,
                                  float* dz);

}  // namespace engine::kernels
