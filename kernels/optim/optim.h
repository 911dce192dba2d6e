// Fused per-tensor optimizer updates: one pass over a parameter tensor reads the parameter, its
// gradient and the optimizer state and writes the new parameter and state. The formulas are
// PyTorch's (torch.optim.SGD and torch.optim.Adam / AdamW algorithm boxes):
//
// SGD, with g the gradient and b the momentum buffer:
//   d = g + weight_decay * p
//   momentum != 0:  b = d                                  on the first step,
//                   b = momentum * b + (1 - dampening) * d  afterwards;
//                   d = d + momentum * b  (nesterov)   or   d = b
//   p = p - lr * d
//
// Adam at step t (t = 1 on the first update), m and v start at zero:
//   decoupled (AdamW):  p = p * (1 - lr * weight_decay)
//   coupled (Adam, L2): g = g + weight_decay * p
//   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
//   p = p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
//
// All arrays are contiguous with n elements. The per-tensor scalars (bias corrections) are
// computed once in double; the per-element arithmetic runs in T, as the CUDA twin does.
#pragma once

#include <cstdint>

namespace engine::kernels {

struct SgdHyper {
  double lr = 0.0;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool first_step = false;  // the momentum buffer holds garbage and is set to d
};

// momentum_buffer may be null when hyper.momentum == 0.
template <typename T>
void sgd_update_cpu(int64_t n, const T* grad, const SgdHyper& hyper, T* param, T* momentum_buffer);

struct AdamHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // AdamW
  int64_t step = 1;                     // t, counted from 1, already incremented for this update
};

template <typename T>
void adam_update_cpu(int64_t n, const T* grad, const AdamHyper& hyper, T* param, T* exp_avg,
                     T* exp_avg_sq);

// ---- CUDA: multi-tensor updates (optim_cuda.cu) ----
// The same per-element arithmetic in f32 over many parameter tensors at once: all tensors of a
// list (one parameter group) are updated in ceil(count / tensors-per-launch) launches, with the
// tensors' pointers and sizes passed inside the kernel's arguments (no upload, no host sync).
// Device pointers; every array is contiguous with n elements.
struct SgdTensorRef {
  float* param = nullptr;
  const float* grad = nullptr;
  float* momentum_buffer = nullptr;  // may be null when hyper.momentum == 0
  int64_t n = 0;
  bool first_step = false;  // per tensor; hyper.first_step is ignored by the multi-tensor call
};
void sgd_update_multi_cuda(const SgdTensorRef* tensors, int64_t count, const SgdHyper& hyper);

struct AdamTensorRef {
  float* param = nullptr;
  const float* grad = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  int64_t n = 0;
  int64_t step = 1;  // this tensor's t (>= 1); hyper.step is ignored by the multi-tensor call
};
// The bias corrections lr / (1 - beta1^t) and sqrt(1 - beta2^t) are computed per tensor on the
// host in double, exactly as adam_update_cpu does.
void adam_update_multi_cuda(const AdamTensorRef* tensors, int64_t count, const AdamHyper& hyper);

}  // namespace engine::kernels
