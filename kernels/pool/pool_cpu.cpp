// max_pool2d, avg_pool2d and adaptive_avg_pool2d (1x1) on the CPU.
//
// Math:     see pool.h (first-max routing for max, count_include_pad for avg).
// Layout:   x, dx [N, C, H, W] and y, dy [N, C, P, Q], contiguous row-major; a "plane" is one
//           (n, c) slice of H W (or P Q) elements.
// Parallel: plain loops inside a plane; OpenMP over the N C planes (from 2^16 input elements),
//           each of which reads and writes only its own planes (no races, results independent
//           of the thread count). The same for max_pool2d's 2x2 / stride-2 fast path (below).
// Cost:     forward max/avg: N C P Q kh kw compares/adds; backward the same again (max rescans the
//           window). Traffic: read x once, write y once: (N C H W + N C P Q) sizeof(T) bytes
//           (backward: read x/dy, write dx). Global average: N C H W adds, the same bytes.
#include "kernels/common/instantiate.h"
#include "kernels/pool/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/common/cpu_parallel.h"

namespace engine::kernels {

namespace {

// Index (ih W + iw, within the plane) of the first maximal in-image cell of window (p, q) in
// row-major window order, or -1 if the window has no in-image cell (validated shapes never
// produce one). A NaN beats any number, so a NaN in the window becomes the output.
template <typename T>
inline int64_t window_argmax(const Pool2dShape& shape, const T* plane, int64_t p, int64_t q) {
  // The in-image part of the window, rows [i0, i1) and columns [j0, j1) in image coordinates:
  // clamping once here keeps the compare loop free of bounds tests (it runs for every output of
  // every forward and backward pass, so it is hot on the CPU).
  const int64_t top = p * shape.stride_h - shape.pad_h, left = q * shape.stride_w - shape.pad_w;
  const int64_t i0 = std::max<int64_t>(top, 0), i1 = std::min(top + shape.kernel_h, shape.H);
  const int64_t j0 = std::max<int64_t>(left, 0), j1 = std::min(left + shape.kernel_w, shape.W);
  if (i0 >= i1 || j0 >= j1) return -1;
  // Pass 1: the first maximal cell, by selects the compiler can make branch-free (whether a cell
  // beats the current best is data dependent, and a branch on it mispredicts about every other
  // time). A comparison with NaN is false, so this pass only notes whether a NaN was seen.
  int64_t best = i0 * shape.W + j0;
  T best_value = plane[best];
  bool saw_nan = false;
  for (int64_t ih = i0; ih < i1; ++ih) {
    for (int64_t iw = j0; iw < j1; ++iw) {
      const int64_t cell = ih * shape.W + iw;
      const T value = plane[cell];
      const int64_t greater = value > best_value;  // 0 or 1; false when either is NaN
      best += (cell - best) * greater;
      best_value = std::max(best_value, value);  // the same choice: value only if greater
      saw_nan |= std::isnan(value);
    }
  }
  if (!saw_nan) return best;
  // Pass 2 (rare): the first NaN wins.
  for (int64_t ih = i0; ih < i1; ++ih) {
    for (int64_t iw = j0; iw < j1; ++iw) {
      if (std::isnan(plane[ih * shape.W + iw])) return ih * shape.W + iw;
    }
  }
  return best;  // not reached
}

}  // namespace

template <typename T>
void max_pool2d_forward_cpu(const Pool2dShape& shape, const T* x, T* y) {
  const int64_t planes = shape.N * shape.C, HW = shape.H * shape.W;
  const int64_t P = shape.out_h(), Q = shape.out_w();
#pragma omp parallel for schedule(static) if (planes * HW >= kMinParallelElements)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T* in = x + plane * HW;
    T* out = y + plane * P * Q;
    for (int64_t p = 0; p < P; ++p) {
      for (int64_t q = 0; q < Q; ++q) {
        const int64_t best = window_argmax(shape, in, p, q);
        out[p * Q + q] = best >= 0 ? in[best] : -std::numeric_limits<T>::infinity();
      }
    }
  }
}

template <typename T>
void max_pool2d_backward_cpu(const Pool2dShape& shape, const T* x, const T* dy, T* dx) {
  const int64_t planes = shape.N * shape.C, HW = shape.H * shape.W;
  const int64_t P = shape.out_h(), Q = shape.out_w();
#pragma omp parallel for schedule(static) if (planes * HW >= kMinParallelElements)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T* in = x + plane * HW;
    const T* grad_out = dy + plane * P * Q;
    T* grad_in = dx + plane * HW;
    std::fill(grad_in, grad_in + HW, T(0));
    for (int64_t p = 0; p < P; ++p) {
      for (int64_t q = 0; q < Q; ++q) {
        const int64_t best = window_argmax(shape, in, p, q);
        if (best >= 0) grad_in[best] += grad_out[p * Q + q];  // overlapping windows add up
      }
    }
  }
}

// ---- max_pool2d fast path: 2x2 windows, stride 2, no padding ------------------------------------
//
// Window (p, q) covers top = row 2p and bottom = row 2p + 1; its cells in the reference's scan
// order are v0 = top[2q], v1 = top[2q+1], v2 = bottom[2q], v3 = bottom[2q+1].
//   Forward: a cell v replaces the running maximum m when v > m, or when v is NaN and m is not
//   (the first NaN wins and stays): the reference's rule, so the same cell's value comes out.
//   Backward: dy goes to the first cell that equals the window's output. Every cell before the
//   reference's argmax is strictly smaller than it (a cell replaces the maximum only when strictly
//   greater), so this is the same cell. `rest` carries dy along the four cells until one takes
//   it. A NaN output equals no cell, so a row with a NaN window is redone window by window with
//   the first-NaN rule (never on the hot path: a NaN activation fails training anyway).
// Written as selects, not branches: whether a cell wins is data dependent (half the windows of
// a ReLU output have ties at 0), branches on it mispredict, and straight-line loops over
// contiguous rows let GCC vectorize them. The backward computes the four cells' gradients of a
// row of windows into four contiguous scratch rows first and interleaves them into dx after:
// GCC does not vectorize the first loop when it stores with stride 2.
// Cost: 3 compares per output forward, 6 more backward; no per-cell index arithmetic.
// Traffic: forward reads x once and writes y once; backward reads x and dy once and writes every
// dx cell once (the windows tile the image, so there is no zeroing pass and no scatter; cells past
// an odd last row or column get 0).

bool max_pool2d_has_fast_path(const Pool2dShape& shape) {
  return shape.kernel_h == 2 && shape.kernel_w == 2 && shape.stride_h == 2 && shape.stride_w == 2 &&
         shape.pad_h == 0 && shape.pad_w == 0;
}

namespace {

template <typename T>
inline int is_nan(T v) {
  return v != v;
}

// 1 when `candidate` replaces the running maximum `current` (see above), else 0.
template <typename T>
inline int replaces(T candidate, T current) {
  return int(candidate > current) | (is_nan(candidate) & (1 - is_nan(current)));
}

template <typename T>
inline T window_max(T v0, T v1, T v2, T v3) {
  T best = v0;
  best = replaces(v1, best) ? v1 : best;
  best = replaces(v2, best) ? v2 : best;
  best = replaces(v3, best) ? v3 : best;
  return best;
}

}  // namespace

template <typename T>
void max_pool2d_forward_fast_cpu(const Pool2dShape& shape, const T* x, T* y) {
  if (!max_pool2d_has_fast_path(shape)) {
    max_pool2d_forward_cpu(shape, x, y);
    return;
  }
  const int64_t planes = shape.N * shape.C, W = shape.W, HW = shape.H * shape.W;
  const int64_t P = shape.out_h(), Q = shape.out_w();
#pragma omp parallel for schedule(static) if (planes * HW >= kMinParallelElements)
  for (int64_t plane = 0; plane < planes; ++plane) {
    for (int64_t p = 0; p < P; ++p) {
      const T* top = x + plane * HW + 2 * p * W;
      const T* bottom = top + W;
      T* out = y + (plane * P + p) * Q;
      for (int64_t q = 0; q < Q; ++q) {
        out[q] = window_max(top[2 * q], top[2 * q + 1], bottom[2 * q], bottom[2 * q + 1]);
      }
    }
  }
}

template <typename T>
void max_pool2d_backward_fast_cpu(const Pool2dShape& shape, const T* x, const T* dy, T* dx) {
  if (!max_pool2d_has_fast_path(shape)) {
    max_pool2d_backward_cpu(shape, x, dy, dx);
    return;
  }
  const int64_t planes = shape.N * shape.C, H = shape.H, W = shape.W, HW = H * W;
  const int64_t P = shape.out_h(), Q = shape.out_w();
#pragma omp parallel if (planes * HW >= kMinParallelElements)
  {
    // dy's share of each cell of one row of windows: top-left, top-right, bottom-left, -right
    std::vector<T> scratch(static_cast<size_t>(4 * Q));
    T* const to_top_left = scratch.data();
    T* const to_top_right = to_top_left + Q;
    T* const to_bottom_left = to_top_right + Q;
    T* const to_bottom_right = to_bottom_left + Q;
#pragma omp for schedule(static)
    for (int64_t plane = 0; plane < planes; ++plane) {
      for (int64_t p = 0; p < P; ++p) {
        const T* top = x + plane * HW + 2 * p * W;
        const T* bottom = top + W;
        const T* grad_out = dy + (plane * P + p) * Q;
        int saw_nan = 0;
        for (int64_t q = 0; q < Q; ++q) {
          const T v0 = top[2 * q], v1 = top[2 * q + 1], v2 = bottom[2 * q], v3 = bottom[2 * q + 1];
          const T best = window_max(v0, v1, v2, v3);
          saw_nan |= is_nan(best);
          // The reference adds dy into a zeroed dx: 0 + dy, which turns a -0 into +0. So does this.
          T rest = grad_out[q] + T(0);
          to_top_left[q] = v0 == best ? rest : T(0);
          rest = v0 == best ? T(0) : rest;
          to_top_right[q] = v1 == best ? rest : T(0);
          rest = v1 == best ? T(0) : rest;
          to_bottom_left[q] = v2 == best ? rest : T(0);
          rest = v2 == best ? T(0) : rest;
          to_bottom_right[q] = rest;
        }
        if (saw_nan) {  // a window's output is NaN exactly when a cell is: dy to its first NaN
          for (int64_t q = 0; q < Q; ++q) {
            const T cells[4] = {top[2 * q], top[2 * q + 1], bottom[2 * q], bottom[2 * q + 1]};
            int first_nan = 0;
            while (first_nan < 4 && !std::isnan(cells[first_nan])) ++first_nan;
            if (first_nan == 4) continue;  // no NaN here: the shares above are right
            T* shares[4] = {to_top_left + q, to_top_right + q, to_bottom_left + q,
                            to_bottom_right + q};
            for (int i = 0; i < 4; ++i) *shares[i] = i == first_nan ? grad_out[q] + T(0) : T(0);
          }
        }
        T* grad_top = dx + plane * HW + 2 * p * W;
        T* grad_bottom = grad_top + W;
        for (int64_t q = 0; q < Q; ++q) {
          grad_top[2 * q] = to_top_left[q];
          grad_top[2 * q + 1] = to_top_right[q];
        }
        for (int64_t q = 0; q < Q; ++q) {
          grad_bottom[2 * q] = to_bottom_left[q];
          grad_bottom[2 * q + 1] = to_bottom_right[q];
        }
        if (W > 2 * Q) {  // an odd last column is in no window
          grad_top[W - 1] = T(0);
          grad_bottom[W - 1] = T(0);
        }
      }
      if (H > 2 * P) std::fill(dx + plane * HW + 2 * P * W, dx + (plane + 1) * HW, T(0));
    }
  }
}

template <typename T>
void avg_pool2d_forward_cpu(const Pool2dShape& shape, const T* x, T* y) {
  const int64_t planes = shape.N * shape.C, H = shape.H, W = shape.W;
  const int64_t P = shape.out_h(), Q = shape.out_w();
  const T divisor = static_cast<T>(shape.kernel_h * shape.kernel_w);
#pragma omp parallel for schedule(static) if (planes * H * W >= kMinParallelElements)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T* in = x + plane * H * W;
    T* out = y + plane * P * Q;
    for (int64_t p = 0; p < P; ++p) {
      for (int64_t q = 0; q < Q; ++q) {
        T sum = T(0);
        for (int64_t i = 0; i < shape.kernel_h; ++i) {
          const int64_t ih = p * shape.stride_h - shape.pad_h + i;
          if (ih < 0 || ih >= H) continue;  // padding: zeros
          for (int64_t j = 0; j < shape.kernel_w; ++j) {
            const int64_t iw = q * shape.stride_w - shape.pad_w + j;
            if (iw >= 0 && iw < W) sum += in[ih * W + iw];
          }
        }
        out[p * Q + q] = sum / divisor;
      }
    }
  }
}

template <typename T>
void avg_pool2d_backward_cpu(const Pool2dShape& shape, const T* dy, T* dx) {
  const int64_t planes = shape.N * shape.C, H = shape.H, W = shape.W;
  const int64_t P = shape.out_h(), Q = shape.out_w();
  const T divisor = static_cast<T>(shape.kernel_h * shape.kernel_w);
#pragma omp parallel for schedule(static) if (planes * H * W >= kMinParallelElements)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T* grad_out = dy + plane * P * Q;
    T* grad_in = dx + plane * H * W;
    std::fill(grad_in, grad_in + H * W, T(0));
    for (int64_t p = 0; p < P; ++p) {
      for (int64_t q = 0; q < Q; ++q) {
        const T share = grad_out[p * Q + q] / divisor;
        for (int64_t i = 0; i < shape.kernel_h; ++i) {
          const int64_t ih = p * shape.stride_h - shape.pad_h + i;
          if (ih < 0 || ih >= H) continue;
          for (int64_t j = 0; j < shape.kernel_w; ++j) {
            const int64_t iw = q * shape.stride_w - shape.pad_w + j;
            if (iw >= 0 && iw < W) grad_in[ih * W + iw] += share;
          }
        }
      }
    }
  }
}

template <typename T>
void adaptive_avg_pool2d_forward_cpu(int64_t planes, int64_t plane_size, const T* x, T* y) {
#pragma omp parallel for schedule(static) if (planes * plane_size >= kMinParallelElements)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T* in = x + plane * plane_size;
    T sum = T(0);
    for (int64_t i = 0; i < plane_size; ++i) sum += in[i];
    y[plane] = sum / static_cast<T>(plane_size);
  }
}

template <typename T>
void adaptive_avg_pool2d_backward_cpu(int64_t planes, int64_t plane_size, const T* dy, T* dx) {
#pragma omp parallel for schedule(static) if (planes * plane_size >= kMinParallelElements)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T share = dy[plane] / static_cast<T>(plane_size);
    std::fill(dx + plane * plane_size, dx + (plane + 1) * plane_size, share);
  }
}

ENGINE_INSTANTIATE_FLOATING(max_pool2d_forward_cpu);
ENGINE_INSTANTIATE_FLOATING(max_pool2d_backward_cpu);
ENGINE_INSTANTIATE_FLOATING(max_pool2d_forward_fast_cpu);
ENGINE_INSTANTIATE_FLOATING(max_pool2d_backward_fast_cpu);
ENGINE_INSTANTIATE_FLOATING(avg_pool2d_forward_cpu);
ENGINE_INSTANTIATE_FLOATING(avg_pool2d_backward_cpu);
ENGINE_INSTANTIATE_FLOATING(adaptive_avg_pool2d_forward_cpu);
ENGINE_INSTANTIATE_FLOATING(adaptive_avg_pool2d_backward_cpu);

}  // namespace engine::kernels
