// softmax family, CPU reference (math in softmax.h): one line of the [outer, n, inner] view at a
// time, element r of line (o, i) at x[(o * n + r) * inner + i].
#include "kernels/common/instantiate.h"
#include "kernels/softmax/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/common/check.h"

namespace engine::kernels {
namespace {

// The max m and the shifted sum s = sum_r exp(x_r - m) of one line. softmax uses exp(x_r - m) / s
// and log_softmax x_r - m - log s rather than going through lse = m + log s: rounding lse to
// the magnitude of m would cost digits when |m| is large.
template <typename T>
struct LineStats {
  T max;
  T shifted_sum;
};

// The max propagates NaN, as torch.amax does (std::max would skip it): otherwise a line such as
// [NaN, -inf] or [+inf, NaN] had max -inf or +inf and logsumexp returned that infinity.
template <typename T>
LineStats<T> line_stats(const T* x, int64_t n, int64_t inner) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t r = 0; r < n; ++r) {
    const T v = x[r * inner];
    if (std::isnan(v) || v > m) m = v;  // once NaN, m stays NaN (v > NaN is false)
  }
  T s = 0;
  for (int64_t r = 0; r < n; ++r) s += std::exp(x[r * inner] - m);
  return {m, s};
}

// log sum_r exp(x_r) of one line, stably. A line of all -inf gives -inf (not NaN), like PyTorch;
// a line holding a NaN gives NaN.
template <typename T>
T line_logsumexp(const T* x, int64_t n, int64_t inner) {
  const LineStats<T> stats = line_stats(x, n, inner);
  if (std::isinf(stats.max)) return stats.max;
  return stats.max + std::log(stats.shifted_sum);
}

}  // namespace

template <typename T>
void logsumexp_cpu(const T* x, int64_t outer, int64_t n, int64_t inner, T* out) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      out[o * inner + i] = line_logsumexp(x + o * n * inner + i, n, inner);
    }
  }
}

template <typename T>
void logsumexp_backward_cpu(const T* x, const T* out, const T* grad_out, int64_t outer, int64_t n,
                            int64_t inner, T* grad_x) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T lse = out[o * inner + i];
      const T g = grad_out[o * inner + i];
      for (int64_t r = 0; r < n; ++r) {
        const int64_t at = (o * n + r) * inner + i;
        grad_x[at] = g * std::exp(x[at] - lse);
      }
    }
  }
}

template <typename T>
void softmax_cpu(const T* x, int64_t outer, int64_t n, int64_t inner, T* y) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      const LineStats<T> stats = line_stats(x + base, n, inner);
      for (int64_t r = 0; r < n; ++r) {
        y[base + r * inner] = std::exp(x[base + r * inner] - stats.max) / stats.shifted_sum;
      }
    }
  }
}

template <typename T>
void softmax_backward_cpu(const T* y, const T* grad_y, int64_t outer, int64_t n, int64_t inner,
                          T* grad_x) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      T dot = 0;  // sum_k g_k y_k
      for (int64_t r = 0; r < n; ++r) dot += grad_y[base + r * inner] * y[base + r * inner];
      for (int64_t r = 0; r < n; ++r) {
        const int64_t at = base + r * inner;
        grad_x[at] = y[at] * (grad_y[at] - dot);
      }
    }
  }
}

template <typename T>
void log_softmax_cpu(const T* x, int64_t outer, int64_t n, int64_t inner, T* y) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      const LineStats<T> stats = line_stats(x + base, n, inner);
      const T log_sum = std::log(stats.shifted_sum);
      for (int64_t r = 0; r < n; ++r)
        y[base + r * inner] = x[base + r * inner] - stats.max - log_sum;
    }
  }
}

template <typename T>
void log_softmax_backward_cpu(const T* y, const T* grad_y, int64_t outer, int64_t n, int64_t inner,
                              T* grad_x) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      T total = 0;  // sum_k g_k
      for (int64_t r = 0; r < n; ++r) total += grad_y[base + r * inner];
      for (int64_t r = 0; r < n; ++r) {
        const int64_t at = base + r * inner;
        grad_x[at] = grad_y[at] - std::exp(y[at]) * total;
      }
    }
  }
}

template <typename T>
void cross_entropy_cpu(const T* logits, const int64_t* labels, int64_t rows, int64_t classes,
                       T* loss, T* row_logsumexp) {
  double total = 0.0;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t label = labels[i];
    ENGINE_CHECK(label >= 0 && label < classes, "cross_entropy: label ", label, " of row ", i,
                 " is out of range [0, ", classes, ")");
    const T* row = logits + i * classes;
    row_logsumexp[i] = line_logsumexp(row, classes, int64_t{1});
    total += static_cast<double>(row_logsumexp[i] - row[label]);
  }
  loss[0] = static_cast<T>(total / static_cast<double>(rows));
}

template <typename T>
void cross_entropy_backward_cpu(const T* logits, const int64_t* labels, const T* row_logsumexp,
                                int64_t rows, int64_t classes, const T* grad_loss, T* grad_logits) {
  const T scale = grad_loss[0] / static_cast<T>(rows);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t c = 0; c < classes; ++c) {
      const int64_t at = i * classes + c;
      const T p = std::exp(logits[at] - row_logsumexp[i]);
      grad_logits[at] = scale * (p - (c == labels[i] ? T(1) : T(0)));
    }
  }
}

ENGINE_INSTANTIATE_FLOATING(logsumexp_cpu);
ENGINE_INSTANTIATE_FLOATING(logsumexp_backward_cpu);
ENGINE_INSTANTIATE_FLOATING(softmax_cpu);
ENGINE_INSTANTIATE_FLOATING(softmax_backward_cpu);
ENGINE_INSTANTIATE_FLOATING(log_softmax_cpu);
ENGINE_INSTANTIATE_FLOATING(log_softmax_backward_cpu);
ENGINE_INSTANTIATE_FLOATING(cross_entropy_cpu);
ENGINE_INSTANTIATE_FLOATING(cross_entropy_backward_cpu);

}  // namespace engine::kernels
