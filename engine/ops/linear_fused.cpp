// linear_relu and linear_l2_normalize (declarations in engine/ops.h; math, kernels and byte
// counts in kernels/linear_relu/linear_relu.h and kernels/linear_l2_normalize/
// linear_l2_normalize.h): a linear layer and what follows it in C2F2 (fc1 -> ReLU) or in a
// metric-N loss (fc2 -> l2_normalize), the bias and the ReLU done in the GEMM's store.
//
// CUDA tensors run the fused kernels, which use our SGEMM tile (the epilogue lives in it); with
// ENGINE_GEMM=cublas they run cuBLAS and the unfused bias and ReLU kernels instead, so the GEMM
// backend keeps its meaning. Under the precision policy tf32 or bf16 (engine/precision.h) they
// run as the unfused ops, whose linear is the tensor-core GEMM in that precision (the fused
// epilogue lives in the strict SGEMM's tile only), as conv2d_pool_relu does under tf32; so do CPU
// f32 tensors, whose linear then rounds its operands as the GPU's. Otherwise CPU tensors
// (f32, f64) run the kernels' references, the compositions of the plain-loop reference ops (slow:
// for checking, e.g. the f64 gradient checks). Backward: ReLU's mask read from the output, or
// l2_normalize's backward, then linear's.
#include <utility>
#include <vector>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/linear_internal.h"
#include "engine/ops/op_utils.h"
#include "engine/precision.h"
#include "kernels/l2_normalize/l2_normalize.h"
#include "kernels/linear_l2_normalize/linear_l2_normalize.h"
#include "kernels/linear_relu/linear_relu.h"
#include "kernels/matmul/matmul.h"
#include "kernels/unary/unary.h"

namespace engine {

namespace {

const float* optional_data(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

bool use_cublas() { return gemm_backend() == GemmBackend::Cublas; }

// Whether an op runs as its unfused ops: under a tensor-core precision, on our CUDA GEMM or on
// the CPU (f32), whose fused references do not round (cuBLAS rounds in its own math mode).
bool unfused_for_precision(const Tensor& x) {
  return detail::policy_rounds_operands(x) && !(x.device().is_cuda() && use_cublas());
}

// z = x W^T (+ b), then relu when asked, through cuBLAS (in the precision policy's math mode)
// and the unfused kernels (f32, CUDA).
void linear_cublas(const Tensor& x, const Tensor& w, const Tensor& b, bool relu, Tensor& z) {
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  kernels::matmul_cublas_precision(m, n, k, x.data<float>(), w.data<float>(), false, true,
                                   z.data<float>(), false, precision());
  if (b.defined()) kernels::add_row_bias_cuda(m, n, b.data<float>(), z.data<float>());
  if (relu) {
    kernels::unary_cuda(kernels::UnaryOp::Relu, z.data<float>(), m * n, kernels::UnaryParams{},
                        z.data<float>());
  }
}

// dz = dy [y > 0]: relu's backward, read from the output (y > 0 exactly where its input is).
Tensor relu_mask(const Tensor& y, const Tensor& dy) {
  Tensor dz = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
  if (dy.device().is_cuda()) {
    kernels::unary_backward_cuda(kernels::UnaryOp::Relu, y.data<float>(), nullptr, dy.data<float>(),
                                 dy.numel(), kernels::UnaryParams{}, dz.data<float>());
    return dz;
  }
  detail::dispatch_floating(dy.dtype(), "linear_relu backward", [&](auto zero) {
    using T = decltype(zero);
    kernels::unary_backward_cpu<T>(kernels::UnaryOp::Relu, y.data<T>(), nullptr, dy.data<T>(),
                                   dy.numel(), kernels::UnaryParams{}, dz.data<T>());
  });
  return dz;
}

void check_features(const Tensor& x, const char* op) {
  ENGINE_CHECK(x.size(1) >= 1, op, ": x ", shape_str(x.shape()), " has no features");
}

}  // namespace

Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  detail::check_linear(x, weight, bias);
  check_features(x, "linear_relu");
  if (unfused_for_precision(x)) return relu(linear(x, weight, bias));
  const Tensor x_dense = detail::dense(x), w_dense = detail::dense(weight);
  const Tensor b_dense = bias.defined() ? detail::dense(bias) : Tensor();
  const int64_t m = x.size(0), k = x.size(1), n = weight.size(0);
  Tensor y = Tensor::empty({m, n}, x.dtype(), x.device());
  if (x.device().is_cuda() && use_cublas()) {
    linear_cublas(x_dense, w_dense, b_dense, /*relu=*/true, y);
  } else if (x.device().is_cuda()) {
    kernels::linear_relu_forward_cuda(m, n, k, x_dense.data<float>(), w_dense.data<float>(),
                                      optional_data(b_dense), y.data<float>());
  } else {
    detail::dispatch_floating(x.dtype(), "linear_relu", [&](auto zero) {
      using T = decltype(zero);
      kernels::linear_relu_forward_cpu<T>(m, n, k, x_dense.data<T>(), w_dense.data<T>(),
                                          b_dense.defined() ? b_dense.data<T>() : nullptr,
                                          y.data<T>());
    });
  }
  if (!needs_tape({x, weight, bias})) return y;
  BackwardFn backward = [x_dense, w_dense, y_saved = y.detach()](const Tensor& grad,
                                                                 const std::vector<bool>& needs) {
    return detail::linear_backward(relu_mask(y_saved, grad.contiguous()), x_dense, w_dense, needs);
  };
  return record("linear_relu", {x, weight, bias}, y, std::move(backward),
                {{"input", x_dense}, {"weight", w_dense}, {"output", y}});
}

Tensor linear_l2_normalize(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  detail::check_linear(x, weight, bias);
  check_features(x, "linear_l2_normalize");
  ENGINE_CHECK(eps > 0.0, "linear_l2_normalize: eps must be positive, got ", eps);
  if (unfused_for_precision(x)) return l2_normalize(linear(x, weight, bias), eps);
  const Tensor x_dense = detail::dense(x), w_dense = detail::dense(weight);
  const Tensor b_dense = bias.defined() ? detail::dense(bias) : Tensor();
  const int64_t m = x.size(0), k = x.size(1), n = weight.size(0);
  Tensor z = Tensor::empty({m, n}, x.dtype(), x.device());  // the linear output, for backward
  Tensor y = Tensor::empty({m, n}, x.dtype(), x.device());
  Tensor norm = Tensor::empty({m}, x.dtype(), x.device());
  if (x.device().is_cuda() && use_cublas()) {
    linear_cublas(x_dense, w_dense, b_dense, /*relu=*/false, z);
    kernels::l2_normalize_forward_cuda(z.data<float>(), m, n, float(eps), y.data<float>(),
                                       norm.data<float>());
  } else if (x.device().is_cuda()) {
    kernels::linear_l2_normalize_forward_cuda(m, n, k, x_dense.data<float>(), w_dense.data<float>(),
                                              optional_data(b_dense), float(eps), z.data<float>(),
                                              y.data<float>(), norm.data<float>());
  } else {
    detail::dispatch_floating(x.dtype(), "linear_l2_normalize", [&](auto zero) {
      using T = decltype(zero);
      kernels::linear_l2_normalize_forward_cpu<T>(m, n, k, x_dense.data<T>(), w_dense.data<T>(),
                                                  b_dense.defined() ? b_dense.data<T>() : nullptr,
                                                  T(eps), z.data<T>(), y.data<T>(), norm.data<T>());
    });
  }
  if (!needs_tape({x, weight, bias})) return y;
  BackwardFn backward = [x_dense, w_dense, z, norm, eps](const Tensor& grad,
                                                         const std::vector<bool>& needs) {
    const Tensor dy = grad.contiguous();
    Tensor dz = Tensor::empty(z.shape(), z.dtype(), z.device());
    if (dy.device().is_cuda()) {
      kernels::l2_normalize_backward_cuda(dy.data<float>(), z.data<float>(), norm.data<float>(),
                                          z.size(0), z.size(1), float(eps), dz.data<float>());
    } else {
      detail::dispatch_floating(dy.dtype(), "linear_l2_normalize backward", [&](auto zero) {
        using T = decltype(zero);
        kernels::l2_normalize_backward_cpu<T>(dy.data<T>(), z.data<T>(), norm.data<T>(), z.size(0),
                                              z.size(1), T(eps), dz.data<T>());
      });
    }
    return detail::linear_backward(dz, x_dense, w_dense, needs);
  };
  return record("linear_l2_normalize", {x, weight, bias}, y, std::move(backward),
                {{"input", x_dense}, {"weight", w_dense}});
}

}  // namespace engine
