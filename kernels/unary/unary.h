// unary: elementwise functions of one tensor (with an optional scalar parameter), and their
// backward.
//
// Math (forward y = f(x); backward dx = g * f'(x) with g = dL/dy):
//   add_scalar  y = x + s              dx = g
//   mul_scalar  y = s x                dx = s g
//   neg         y = -x                 dx = -g
//   relu        y = max(x, 0)          dx = g [x > 0]          (relu'(0) = 0)
//   exp         y = e^x                dx = g y
//   log         y = ln x               dx = g / x
//   sqrt        y = sqrt(x)            dx = g * 0.5 / y        (= 0.5 / sqrt(x))
//   pow         y = x^p                dx = g p x^(p-1)        (p = 0: dx = 0 everywhere)
//   abs         y = |x|                dx = g sign(x)          (abs'(0) = 0)
//   sign        y = sign(x) in {-1,0,1} dx = 0
//   clamp       y = min(max(x, lo), hi) dx = g [lo <= x <= hi] (PyTorch's convention)
// NaN inputs propagate through relu, abs and clamp (they are not silently zeroed).
//
// Layout: contiguous arrays of n elements. The backward reads only what its formula needs: `x`
// (relu, log, pow, abs, clamp) or `y` (exp, sqrt); the other may be null.
// CPU: plain loops, one per op. Cost: n evaluations of f (or f'); reads n (forward) or 2n
// (backward) elements, writes n.
#pragma once

#include <cstdint>

namespace engine::kernels {

enum class UnaryOp { AddScalar, MulScalar, Neg, Relu, Exp, Log, Sqrt, Pow, Abs, Sign, Clamp };

// The scalars some ops take: s for add/mul_scalar, p for pow (`scalar`); lo, hi for clamp.
struct UnaryParams {
  double scalar = 0.0;
  double low = 0.0;
  double high = 0.0;
};

template <typename T>
void unary_cpu(UnaryOp op, const T* x, int64_t n, UnaryParams params, T* y);

template <typename T>
void unary_backward_cpu(UnaryOp op, const T* x, const T* y, const T* grad_y, int64_t n,
                        UnaryParams params, T* grad_x);

// CUDA twins (f32, device pointers; parallelization in unary_cuda.cu).
void unary_cuda(UnaryOp op, const float* x, int64_t n, UnaryParams params, float* y);
void unary_backward_cuda(UnaryOp op, const float* x, const float* y, const float* grad_y, int64_t n,
                         UnaryParams params, float* grad_x);

// Which saved tensors unary_backward_cpu reads for `op` (the engine saves only those).
inline bool unary_backward_reads_x(UnaryOp op) {
  return op == UnaryOp::Relu || op == UnaryOp::Log || op == UnaryOp::Pow || op == UnaryOp::Abs ||
         op == UnaryOp::Clamp;
}
inline bool unary_backward_reads_y(UnaryOp op) { return op == UnaryOp::Exp || op == UnaryOp::Sqrt; }

}  // namespace engine::kernels
