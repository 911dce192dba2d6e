// batch_norm with K branches, CPU reference (math and layout in batch_norm.h).
//
// Parallelization: plain loops, route by route, channel by channel. Statistics use two passes
// (mean, then sum of squared deviations) with double accumulators, so the reference stays the
// more accurate side of any CPU/CUDA comparison even for large-mean inputs.
// Cost per pass over x: forward train reads x three times (mean, variance, normalize) and writes
// y once, ~7 FLOPs/element; eval reads x once, ~2 FLOPs/element; backward reads dy and x twice
// and writes dx once, ~8 FLOPs/element.
#include <cmath>

#include "kernels/batch_norm/batch_norm.h"
#include "kernels/common/instantiate.h"

namespace engine::kernels {
namespace {

// x[n, c, s] for n in the route's rows, s in [0, HW): calls fn(flat index).
template <typename Fn>
void for_route_channel(const BatchNormShape& shape, int r, int64_t c, Fn&& fn) {
  for (int64_t n = shape.route_begin[r]; n < shape.route_end[r]; ++n) {
    const int64_t base = (n * shape.C + c) * shape.HW;
    for (int64_t s = 0; s < shape.HW; ++s) fn(base + s);
  }
}

int64_t route_count(const BatchNormShape& shape, int r) {
  return (shape.route_end[r] - shape.route_begin[r]) * shape.HW;
}

// y = (x - mean) * invstd * weight + bias over one (route, channel).
template <typename T>
void normalize(const BatchNormShape& shape, int r, int64_t c, const T* x, T mean, T invstd,
               T weight, T bias, T* y) {
  for_route_channel(shape, r, c, [&](int64_t i) { y[i] = (x[i] - mean) * invstd * weight + bias; });
}

}  // namespace

template <typename T>
void batch_norm_forward_train_cpu(const BatchNormShape& shape, const T* x, const T* weight,
                                  const T* bias, T momentum, T eps, T* y, T* save_mean,
                                  T* save_invstd, T* running_mean, T* running_var) {
  for (int r = 0; r < shape.num_routes; ++r) {
    const int64_t k = shape.route_branch[r];
    const double m = static_cast<double>(route_count(shape, r));
    for (int64_t c = 0; c < shape.C; ++c) {
      double sum = 0.0;
      for_route_channel(shape, r, c, [&](int64_t i) { sum += x[i]; });
      const double mean = sum / m;
      double squares = 0.0;
      for_route_channel(shape, r, c, [&](int64_t i) {
        const double d = x[i] - mean;
        squares += d * d;
      });
      const double var = squares / m;  // biased: what the batch is normalized with
      const T invstd = static_cast<T>(1.0 / std::sqrt(var + static_cast<double>(eps)));
      save_mean[r * shape.C + c] = static_cast<T>(mean);
      save_invstd[r * shape.C + c] = invstd;

      // The running variance estimates the population variance: unbiased, m / (m - 1).
      const int64_t p = k * shape.C + c;
      running_mean[p] = static_cast<T>((1.0 - momentum) * running_mean[p] + momentum * mean);
      running_var[p] =
          static_cast<T>((1.0 - momentum) * running_var[p] + momentum * var * m / (m - 1.0));

      normalize(shape, r, c, x, static_cast<T>(mean), invstd, weight[p], bias[p], y);
    }
  }
}

template <typename T>
void batch_norm_forward_eval_cpu(const BatchNormShape& shape, const T* x, const T* weight,
                                 const T* bias, const T* running_mean, const T* running_var, T eps,
                                 T* y, T* save_mean, T* save_invstd) {
  for (int r = 0; r < shape.num_routes; ++r) {
    const int64_t k = shape.route_branch[r];
    for (int64_t c = 0; c < shape.C; ++c) {
      const int64_t p = k * shape.C + c;
      const T mean = running_mean[p];
      const T invstd = static_cast<T>(1.0 / std::sqrt(static_cast<double>(running_var[p]) + eps));
      save_mean[r * shape.C + c] = mean;
      save_invstd[r * shape.C + c] = invstd;
      normalize(shape, r, c, x, mean, invstd, weight[p], bias[p], y);
    }
  }
}

template <typename T>
void batch_norm_backward_cpu(const BatchNormShape& shape, bool training, const T* dy, const T* x,
                             const T* weight, const T* save_mean, const T* save_invstd, T* dx,
                             T* dweight, T* dbias) {
  // Branches no route uses get zero parameter gradients.
  for (int64_t p = 0; p < shape.K * shape.C; ++p) {
    if (dweight) dweight[p] = T(0);
    if (dbias) dbias[p] = T(0);
  }
  for (int r = 0; r < shape.num_routes; ++r) {
    const int64_t k = shape.route_branch[r];
    const double m = static_cast<double>(route_count(shape, r));
    for (int64_t c = 0; c < shape.C; ++c) {
      const double mean = save_mean[r * shape.C + c];
      const double invstd = save_invstd[r * shape.C + c];
      const int64_t p = k * shape.C + c;

      double sum_dy = 0.0, sum_dy_xhat = 0.0;
      for_route_channel(shape, r, c, [&](int64_t i) {
        sum_dy += dy[i];
        sum_dy_xhat += dy[i] * (x[i] - mean) * invstd;
      });
      if (dweight) dweight[p] = static_cast<T>(sum_dy_xhat);
      if (dbias) dbias[p] = static_cast<T>(sum_dy);
      if (!dx) continue;

      const double scale = weight[p] * invstd;
      if (training) {
        // The batch statistics depend on every x of the route: the two mean terms remove the
        // components of dy along the constant and along xhat.
        const double mean_dy = sum_dy / m, mean_dy_xhat = sum_dy_xhat / m;
        for_route_channel(shape, r, c, [&](int64_t i) {
          const double xhat = (x[i] - mean) * invstd;
          dx[i] = static_cast<T>(scale * (dy[i] - mean_dy - xhat * mean_dy_xhat));
        });
      } else {
        for_route_channel(shape, r, c, [&](int64_t i) { dx[i] = static_cast<T>(scale * dy[i]); });
      }
    }
  }
}

ENGINE_INSTANTIATE_FLOATING(batch_norm_forward_train_cpu);
ENGINE_INSTANTIATE_FLOATING(batch_norm_forward_eval_cpu);
ENGINE_INSTANTIATE_FLOATING(batch_norm_backward_cpu);

}  // namespace engine::kernels
