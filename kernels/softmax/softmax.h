// softmax family along one axis: softmax, log_softmax, logsumexp, cross-entropy; forward and
// backward.
//
// Layout: x is contiguous and viewed as [outer, n, inner]; the op acts along the middle axis n
// (for a row-wise softmax of an [N, C] matrix: outer = N, n = C, inner = 1). Outputs of softmax
// and log_softmax have x's layout; logsumexp's output is [outer, inner].
//
// Math (for one line x_0..x_{n-1}, m = max_r x_r, s = sum_r exp(x_r - m)):
//   logsumexp      lse = m + log s                     (subtracting m: exp never overflows)
//   softmax        y_r = exp(x_r - m) / s
//   log_softmax    y_r = x_r - m - log s
//   backward, with g = dL/dy:
//     logsumexp    dx_r = g * exp(x_r - lse)           (= g * softmax_r)
//     softmax      dx_r = y_r (g_r - sum_k g_k y_k)
//     log_softmax  dx_r = g_r - exp(y_r) sum_k g_k
// Cross-entropy on logits [N, C] with labels y_i in [0, C):
//   loss = (1/N) sum_i (lse_i - x_{i, y_i});  dx_{i,c} = (g/N) (softmax_{i,c} - [c == y_i]).
//   The forward also writes lse_i per row so the backward does not recompute it; g is read
//   through a pointer (a one-element array) so the CUDA twin can take it from device memory.
//
// CPU: plain loops, one line at a time; three passes over a line (max, sum, write).
// Cost per element: ~1 exp + a few FLOPs; reads x once per pass (3 passes), writes once.
#pragma once

#include <cstdint>

namespace engine::kernels {

template <typename T>
void logsumexp_cpu(const T* x, int64_t outer, int64_t n, int64_t inner, T* out);
template <typename T>
void logsumexp_backward_cpu(const T* x, const T* out, const T* grad_out, int64_t outer, int64_t n,
                            int64_t inner, T* grad_x);

template <typename T>
void softmax_cpu(const T* x, int64_t outer, int64_t n, int64_t inner, T* y);
template <typename T>
void softmax_backward_cpu(const T* y, const T* grad_y, int64_t outer, int64_t n, int64_t inner,
                          T* grad_x);

template <typename T>
void log_softmax_cpu(const T* x, int64_t outer, int64_t n, int64_t inner, T* y);
template <typename T>
void log_softmax_backward_cpu(const T* y, const T* grad_y, int64_t outer, int64_t n, int64_t inner,
                              T* grad_x);

// Throws engine::Error naming cross_entropy when a label is outside [0, classes).
template <typename T>
void cross_entropy_cpu(const T* logits, const int64_t* labels, int64_t rows, int64_t classes,
                       T* loss, T* row_logsumexp);
template <typename T>
void cross_entropy_backward_cpu(const T* logits, const int64_t* labels, const T* row_logsumexp,
                                int64_t rows, int64_t classes, const T* grad_loss, T* grad_logits);

// CUDA twins (f32, device pointers, same arguments; parallelization in softmax_cuda.cu).
void logsumexp_cuda(const float* x, int64_t outer, int64_t n, int64_t inner, float* out);
void logsumexp_backward_cuda(const float* x, const float* out, const float* grad_out, int64_t outer,
                             int64_t n, int64_t inner, float* grad_x);
void softmax_cuda(const float* x, int64_t outer, int64_t n, int64_t inner, float* y);
void softmax_backward_cuda(const float* y, const float* grad_y, int64_t outer, int64_t n,
                           int64_t inner, float* grad_x);
void log_softmax_cuda(const float* x, int64_t outer, int64_t n, int64_t inner, float* y);
void log_softmax_backward_cuda(const float* y, const float* grad_y, int64_t outer, int64_t n,
                               int64_t inner, float* grad_x);
// Labels live on the device, so they are checked inside the kernel, not on the host (that would
// need a device->host copy, i.e. a sync). A label outside [0, classes) makes the kernel print
//   "cross_entropy_cuda: label L of row I is out of range [0, C)"
// and __trap(): the error surfaces at the next synchronizing CUDA call (e.g. loss.item()) as an
// engine::Error "unspecified launch failure", and the CUDA context is unusable from then on (a
// sticky error; the process must exit). The backward reads labels only to compare with c, so it
// needs no check.
void cross_entropy_cuda(const float* logits, const int64_t* labels, int64_t rows, int64_t classes,
                        float* loss, float* row_logsumexp);
void cross_entropy_backward_cuda(const float* logits, const int64_t* labels,
                                 const float* row_logsumexp, int64_t rows, int64_t classes,
                                 const float* grad_loss, float* grad_logits);

}  // namespace engine::kernels
