// The fused PGD step, CPU reference (math and layout in pgd_step.h).
//
// Parallelization: one plain loop; elements are independent. Cost: ~8 FLOPs and 4 sizeof(T)
// bytes per element.
#include "kernels/common/instantiate.h"
#include "kernels/pgd_step/pgd_step.h"

namespace engine::kernels {
namespace {

// sign(v) in {-1, 0, +1}; NaN stays NaN.
template <typename T>
T sign_of(T v) {
  if (v > T(0)) return T(1);
  if (v < T(0)) return T(-1);
  return v == T(0) ? T(0) : v;
}

// Comparisons are false for NaN, so NaN passes through (std::min/max would drop it on one side).
template <typename T>
T clip(T v, T low, T high) {
  if (v < low) return low;
  if (v > high) return high;
  return v;
}

}  // namespace

template <typename T>
void pgd_step_cpu(int64_t n, const T* x, const T* x0, const T* grad, T alpha, T eps, T* x_new,
                  T* max_delta) {
  T largest = T(0);
  for (int64_t i = 0; i < n; ++i) {
    const T stepped = x[i] - alpha * sign_of(grad[i]);  // alpha * sign is exact: no rounding
    const T d = clip(stepped - x0[i], -eps, eps);       // project onto the eps-ball around x0
    const T out = clip(x0[i] + d, T(0), T(1));          // stay a valid image
    x_new[i] = out;
    const T delta = out >= x0[i] ? out - x0[i] : x0[i] - out;  // |out - x0|, NaN stays NaN
    if (!(delta <= largest)) largest = delta;                  // NaN wins, as on the GPU
  }
  if (max_delta != nullptr) *max_delta = largest;
}

ENGINE_INSTANTIATE_FLOATING(pgd_step_cpu);

}  // namespace engine::kernels
