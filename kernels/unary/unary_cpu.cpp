// unary, CPU reference: one plain single-threaded loop per op over contiguous arrays (math,
// layout and cost: unary.h).
#include "kernels/common/instantiate.h"
#include "kernels/unary/unary.h"

#include <algorithm>
#include <cmath>

namespace engine::kernels {
namespace {

template <typename T, typename F>
void map(const T* x, int64_t n, T* y, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

template <typename T>
T sign_of(T v) {
  return static_cast<T>((v > T(0)) - (v < T(0)));
}

}  // namespace

template <typename T>
void unary_cpu(UnaryOp op, const T* x, int64_t n, UnaryParams params, T* y) {
  const T s = static_cast<T>(params.scalar);
  const T lo = static_cast<T>(params.low);
  const T hi = static_cast<T>(params.high);
  switch (op) {
    case UnaryOp::AddScalar:
      map(x, n, y, [s](T v) { return v + s; });
      break;
    case UnaryOp::MulScalar:
      map(x, n, y, [s](T v) { return v * s; });
      break;
    case UnaryOp::Neg:
      map(x, n, y, [](T v) { return -v; });
      break;
    case UnaryOp::Relu:
      map(x, n, y, [](T v) { return v < T(0) ? T(0) : v; });
      break;
    case UnaryOp::Exp:
      map(x, n, y, [](T v) { return std::exp(v); });
      break;
    case UnaryOp::Log:
      map(x, n, y, [](T v) { return std::log(v); });
      break;
    case UnaryOp::Sqrt:
      map(x, n, y, [](T v) { return std::sqrt(v); });
      break;
    case UnaryOp::Pow:
      map(x, n, y, [s](T v) { return std::pow(v, s); });
      break;
    case UnaryOp::Abs:
      map(x, n, y, [](T v) { return std::fabs(v); });
      break;
    case UnaryOp::Sign:
      map(x, n, y, [](T v) { return std::isnan(v) ? v : sign_of(v); });
      break;
    case UnaryOp::Clamp:
      // NaN < lo and hi < NaN are false, so a NaN passes through unchanged.
      map(x, n, y, [lo, hi](T v) { return v < lo ? lo : (hi < v ? hi : v); });
      break;
  }
}

template <typename T>
void unary_backward_cpu(UnaryOp op, const T* x, const T* y, const T* grad_y, int64_t n,
                        UnaryParams params, T* grad_x) {
  const T s = static_cast<T>(params.scalar);
  const T lo = static_cast<T>(params.low);
  const T hi = static_cast<T>(params.high);
  const T* g = grad_y;
  switch (op) {
    case UnaryOp::AddScalar:
      for (int64_t i = 0; i < n; ++i) grad_x[i] = g[i];
      break;
    case UnaryOp::MulScalar:
      for (int64_t i = 0; i < n; ++i) grad_x[i] = s * g[i];
      break;
    case UnaryOp::Neg:
      for (int64_t i = 0; i < n; ++i) grad_x[i] = -g[i];
      break;
    case UnaryOp::Relu:
      for (int64_t i = 0; i < n; ++i) grad_x[i] = x[i] > T(0) ? g[i] : T(0);
      break;
    case UnaryOp::Exp:
      for (int64_t i = 0; i < n; ++i) grad_x[i] = g[i] * y[i];
      break;
    case UnaryOp::Log:
      for (int64_t i = 0; i < n; ++i) grad_x[i] = g[i] / x[i];
      break;
    case UnaryOp::Sqrt:
      for (int64_t i = 0; i < n; ++i) grad_x[i] = g[i] * T(0.5) / y[i];
      break;
    case UnaryOp::Pow:
      // x^0 is constant; p x^(p-1) would give 0 * inf = NaN at x = 0.
      for (int64_t i = 0; i < n; ++i) {
        grad_x[i] = s == T(0) ? T(0) : g[i] * s * std::pow(x[i], s - T(1));
      }
      break;
    case UnaryOp::Abs:
      for (int64_t i = 0; i < n; ++i) grad_x[i] = g[i] * sign_of(x[i]);
      break;
    case UnaryOp::Sign:
      for (int64_t i = 0; i < n; ++i) grad_x[i] = T(0);
      break;
    case UnaryOp::Clamp:
      for (int64_t i = 0; i < n; ++i) grad_x[i] = (lo <= x[i] && x[i] <= hi) ? g[i] : T(0);
      break;
  }
}

ENGINE_INSTANTIATE_FLOATING(unary_cpu);
ENGINE_INSTANTIATE_FLOATING(unary_backward_cpu);

}  // namespace engine::kernels
