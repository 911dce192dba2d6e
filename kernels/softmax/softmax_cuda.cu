// softmax family, CUDA, f32: softmax, log_softmax, logsumexp, cross-entropy; forward and
// backward (math: softmax.h). Every line is made stable by subtracting its max before exp.
//
// Layout: x contiguous, viewed as [outer, n, inner]; line (o, i) is x[(o * n + r) * inner + i],
//   r < n. softmax / log_softmax outputs have x's layout, logsumexp's is [outer, inner] (line
//   (o, i) -> o * inner + i). Cross-entropy: logits [rows, classes] (inner = 1), labels [rows].
// Parallel, two shapes of work:
//   * inner == 1 (the usual row-wise case): one block per line (grid-stride over lines), 32-256
//     threads (a multiple of 32 no larger than the row needs). Threads stride over r, so every
//     pass reads the row coalesced. Pass 1: thread max -> block max; pass 2: thread sum of
//     exp(x_r - m) -> block sum; pass 3: write. Block reductions: warp shuffles, one value per
//     warp through shared memory, then one more warp-level tree; all threads get the result.
//   * inner > 1 (softmax over a non-last dim): one thread per line (grid-stride over the
//     outer * inner lines). Consecutive threads own consecutive i, so each step r reads
//     consecutive addresses across a warp (coalesced); the three passes are sequential loops.
//   logsumexp's backward and cross-entropy's backward have no reduction: one thread per element.
//   Cross-entropy's mean over rows is one block of 256 threads, a fixed tree (deterministic).
// Cost (n elements per line, L lines): forward ~L n (1 exp + 4 FLOPs); reads 3 L n floats (the
//   2nd and 3rd passes mostly from L1/L2 for rows up to tens of KB) and writes L n (logsumexp: L).
//   Backward reads 2 L n twice, writes L n. Memory bound: floor (4n L + 4n L) bytes / bandwidth.
// Labels live on the device: cross_entropy_mean_kernel checks them in-kernel and reports a bad
//   one with printf + __trap() (softmax.h says how that surfaces) rather than syncing the host.
#include <cstdio>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduction.cuh"
#include "kernels/softmax/softmax.h"

namespace engine::kernels {
namespace {

constexpr int kThreads = 256;  // thread-per-line and elementwise kernels; the cross-entropy mean

enum class LineOp { Softmax, LogSoftmax, LogSumExp };

// max that propagates NaN, as torch.amax and the CPU reference do (fmaxf would skip it and leave
// a line such as [NaN, -inf] with max -inf, and logsumexp -inf instead of NaN).
__device__ inline float nan_max(float a, float b) {
  return (isnan(a) || isnan(b)) ? NAN : fmaxf(a, b);
}

struct NanMaxOp {
  __device__ float operator()(float a, float b) const { return nan_max(a, b); }
};

// The block's max with NaN winning, on the shared block reduction (kernels/common/reduction.cuh,
// which also has block_sum); every thread gets it.
__device__ inline float block_max(float v, float* scratch) {
  return block_reduce(v, -INFINITY, scratch, NanMaxOp{});
}

// log sum exp from the line's max m and shifted sum s. A line of all -inf has m = -inf: the
// answer is -inf (not -inf + log 0 = NaN), like the CPU reference and PyTorch. A line holding a
// NaN has m = NaN (nan_max), so the answer is NaN.
__device__ inline float lse_from(float m, float s) { return isinf(m) ? m : m + logf(s); }

// ---- forward: softmax, log_softmax, logsumexp -----------------------------------------------

// inner == 1: block per line; line `line` is x[line * n + r].
__global__ void line_forward_rows_kernel(LineOp op, const float* x, int64_t lines, int64_t n,
                                         float* out) {
  __shared__ float scratch[kWarpSize];
  for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) {
    const float* row = x + line * n;
    float m = -INFINITY;
    for (int64_t r = threadIdx.x; r < n; r += blockDim.x) m = nan_max(m, row[r]);
    m = block_max(m, scratch);
    float s = 0.0f;
    for (int64_t r = threadIdx.x; r < n; r += blockDim.x) s += expf(row[r] - m);
    s = block_sum(s, scratch);
    if (op == LineOp::LogSumExp) {
      if (threadIdx.x == 0) out[line] = lse_from(m, s);
    } else if (op == LineOp::Softmax) {
      for (int64_t r = threadIdx.x; r < n; r += blockDim.x)
        out[line * n + r] = expf(row[r] - m) / s;
    } else {
      // x - m - log s, not x - lse: rounding lse to the magnitude of m would lose digits.
      const float log_s = logf(s);
      for (int64_t r = threadIdx.x; r < n; r += blockDim.x) out[line * n + r] = row[r] - m - log_s;
    }
  }
}

// inner > 1: thread per line L = o * inner + i, element r at base + r * inner with
// base = o * n * inner + i. logsumexp writes out[L].
__global__ void line_forward_columns_kernel(LineOp op, const float* x, int64_t outer, int64_t n,
                                            int64_t inner, float* out) {
  for (int64_t line = grid_thread_index(); line < outer * inner; line += grid_thread_count()) {
    const int64_t o = line / inner, i = line % inner;
    const int64_t base = o * n * inner + i;
    float m = -INFINITY;
    for (int64_t r = 0; r < n; ++r) m = nan_max(m, x[base + r * inner]);
    float s = 0.0f;
    for (int64_t r = 0; r < n; ++r) s += expf(x[base + r * inner] - m);
    if (op == LineOp::LogSumExp) {
      out[line] = lse_from(m, s);
    } else if (op == LineOp::Softmax) {
      for (int64_t r = 0; r < n; ++r) out[base + r * inner] = expf(x[base + r * inner] - m) / s;
    } else {
      const float log_s = logf(s);
      for (int64_t r = 0; r < n; ++r) out[base + r * inner] = x[base + r * inner] - m - log_s;
    }
  }
}

// ---- backward of softmax and log_softmax (they read only y) -----------------------------------
//   softmax      dx_r = y_r (g_r - sum_k g_k y_k)
//   log_softmax  dx_r = g_r - exp(y_r) sum_k g_k

__global__ void line_backward_rows_kernel(bool log, const float* y, const float* g, int64_t lines,
                                          int64_t n, float* dx) {
  __shared__ float scratch[kWarpSize];
  for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) {
    const int64_t base = line * n;
    float acc = 0.0f;
    for (int64_t r = threadIdx.x; r < n; r += blockDim.x) {
      acc += log ? g[base + r] : g[base + r] * y[base + r];
    }
    acc = block_sum(acc, scratch);
    for (int64_t r = threadIdx.x; r < n; r += blockDim.x) {
      const int64_t at = base + r;
      dx[at] = log ? g[at] - expf(y[at]) * acc : y[at] * (g[at] - acc);
    }
  }
}

__global__ void line_backward_columns_kernel(bool log, const float* y, const float* g,
                                             int64_t outer, int64_t n, int64_t inner, float* dx) {
  for (int64_t line = grid_thread_index(); line < outer * inner; line += grid_thread_count()) {
    const int64_t base = (line / inner) * n * inner + line % inner;
    float acc = 0.0f;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t at = base + r * inner;
      acc += log ? g[at] : g[at] * y[at];
    }
    for (int64_t r = 0; r < n; ++r) {
      const int64_t at = base + r * inner;
      dx[at] = log ? g[at] - expf(y[at]) * acc : y[at] * (g[at] - acc);
    }
  }
}

// logsumexp backward, elementwise: element f of x lies on line (o, i) with i = f % inner and
// o = f / (n * inner); dx_f = g[o * inner + i] * exp(x_f - lse[o * inner + i]).
__global__ void logsumexp_backward_kernel(const float* x, const float* lse, const float* g,
                                          int64_t n, int64_t inner, int64_t total, float* dx) {
  for (int64_t f = grid_thread_index(); f < total; f += grid_thread_count()) {
    const int64_t line = (f / (n * inner)) * inner + f % inner;
    dx[f] = g[line] * expf(x[f] - lse[line]);
  }
}

// ---- cross-entropy ------------------------------------------------------------------------------

// One block: loss = (1/rows) sum_i (lse_i - logits[i, label_i]), a fixed-order tree. Labels are
// checked here, where they are first used as an address.
__global__ void cross_entropy_mean_kernel(const float* logits, const int64_t* labels,
                                          const float* row_lse, int64_t rows, int64_t classes,
                                          float* loss) {
  __shared__ float scratch[kWarpSize];
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    const int64_t label = labels[i];
    if (label < 0 || label >= classes) {
      printf("cross_entropy_cuda: label %lld of row %lld is out of range [0, %lld)\n",
             static_cast<long long>(label), static_cast<long long>(i),
             static_cast<long long>(classes));
      __trap();
    }
    acc += row_lse[i] - logits[i * classes + label];
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) loss[0] = acc / static_cast<float>(rows);
}

// dx_{i,c} = (g / rows) (exp(x_{i,c} - lse_i) - [c == label_i]), element f = i * classes + c.
__global__ void cross_entropy_backward_kernel(const float* logits, const int64_t* labels,
                                              const float* row_lse, int64_t rows, int64_t classes,
                                              const float* grad_loss, float* dx) {
  const float scale = grad_loss[0] / static_cast<float>(rows);
  for (int64_t f = grid_thread_index(); f < rows * classes; f += grid_thread_count()) {
    const int64_t i = f / classes, c = f % classes;
    const float p = expf(logits[f] - row_lse[i]);
    dx[f] = scale * (p - (c == labels[i] ? 1.0f : 0.0f));
  }
}

// ---- launchers ----------------------------------------------------------------------------------

void line_forward(LineOp op, const char* what, const float* x, int64_t outer, int64_t n,
                  int64_t inner, float* out) {
  // n == 0 needs no special case: m = -inf, s = 0, logsumexp = -inf (as on the CPU), and
  // softmax / log_softmax have nothing to write.
  if (outer * inner == 0) return;
  if (inner == 1) {
    line_forward_rows_kernel<<<grid_for_items(outer), row_block_threads(n), 0, current_stream()>>>(
        op, x, outer, n, out);
  } else {
    line_forward_columns_kernel<<<grid_for(outer * inner, kThreads), kThreads, 0,
                                  current_stream()>>>(op, x, outer, n, inner, out);
  }
  CUDA_CHECK_LAUNCH(what, " [outer, n, inner] = [", outer, ", ", n, ", ", inner, "]");
}

void line_backward(bool log, const char* what, const float* y, const float* g, int64_t outer,
                   int64_t n, int64_t inner, float* dx) {
  if (outer * n * inner == 0) return;
  if (inner == 1) {
    line_backward_rows_kernel<<<grid_for_items(outer), row_block_threads(n), 0, current_stream()>>>(
        log, y, g, outer, n, dx);
  } else {
    line_backward_columns_kernel<<<grid_for(outer * inner, kThreads), kThreads, 0,
                                   current_stream()>>>(log, y, g, outer, n, inner, dx);
  }
  CUDA_CHECK_LAUNCH(what, " [outer, n, inner] = [", outer, ", ", n, ", ", inner, "]");
}

}  // namespace

void logsumexp_cuda(const float* x, int64_t outer, int64_t n, int64_t inner, float* out) {
  line_forward(LineOp::LogSumExp, "logsumexp_cuda", x, outer, n, inner, out);
}

void logsumexp_backward_cuda(const float* x, const float* out, const float* grad_out, int64_t outer,
                             int64_t n, int64_t inner, float* grad_x) {
  const int64_t total = outer * n * inner;
  if (total == 0) return;
  logsumexp_backward_kernel<<<grid_for(total, kThreads), kThreads, 0, current_stream()>>>(
      x, out, grad_out, n, inner, total, grad_x);
  CUDA_CHECK_LAUNCH("logsumexp_backward_cuda [outer, n, inner] = [", outer, ", ", n, ", ", inner,
                    "]");
}

void softmax_cuda(const float* x, int64_t outer, int64_t n, int64_t inner, float* y) {
  line_forward(LineOp::Softmax, "softmax_cuda", x, outer, n, inner, y);
}

void softmax_backward_cuda(const float* y, const float* grad_y, int64_t outer, int64_t n,
                           int64_t inner, float* grad_x) {
  line_backward(false, "softmax_backward_cuda", y, grad_y, outer, n, inner, grad_x);
}

void log_softmax_cuda(const float* x, int64_t outer, int64_t n, int64_t inner, float* y) {
  line_forward(LineOp::LogSoftmax, "log_softmax_cuda", x, outer, n, inner, y);
}

void log_softmax_backward_cuda(const float* y, const float* grad_y, int64_t outer, int64_t n,
                               int64_t inner, float* grad_x) {
  line_backward(true, "log_softmax_backward_cuda", y, grad_y, outer, n, inner, grad_x);
}

void cross_entropy_cuda(const float* logits, const int64_t* labels, int64_t rows, int64_t classes,
                        float* loss, float* row_logsumexp) {
  ENGINE_CHECK(rows > 0 && classes > 0, "cross_entropy_cuda: logits [", rows, ", ", classes,
               "] must have at least one row and one class");
  line_forward(LineOp::LogSumExp, "cross_entropy_cuda (row logsumexp)", logits, rows, classes, 1,
               row_logsumexp);
  cross_entropy_mean_kernel<<<1, kThreads, 0, current_stream()>>>(logits, labels, row_logsumexp,
                                                                  rows, classes, loss);
  CUDA_CHECK_LAUNCH("cross_entropy_cuda (mean) logits [", rows, ", ", classes, "]");
}

void cross_entropy_backward_cuda(const float* logits, const int64_t* labels,
                                 const float* row_logsumexp, int64_t rows, int64_t classes,
                                 const float* grad_loss, float* grad_logits) {
  if (rows * classes == 0) return;
  cross_entropy_backward_kernel<<<grid_for(rows * classes, kThreads), kThreads, 0,
                                  current_stream()>>>(logits, labels, row_logsumexp, rows, classes,
                                                      grad_loss, grad_logits);
  CUDA_CHECK_LAUNCH("cross_entropy_backward_cuda logits [", rows, ", ", classes, "]");
}

}  // namespace engine::kernels
