// matmul and linear: validation, dispatch to kernels/matmul, and their backward.
//
//   matmul  C = A B            dA = dC B^T          dB = A^T dC
//   linear  y = x W^T + b      dx = dy W            dW = dy^T x          db = column sums of dy
//
// Transposed operands are never materialized: the GEMM kernel reads a row-major buffer as its
// transpose in place (trans_a / trans_b). CPU tensors use Eigen's GEMM; CUDA tensors (f32) our
// SGEMM or cuBLAS (in the policy's math mode: kernels/common/library_math.h), whichever
// engine::gemm_backend() names when the kernel runs (engine/backend.h), or under the precision
// policy tf32 or bf16 (engine/precision.h) our tensor-core GEMM in that precision (WMMA, or
// mma.sync or wgmma as ENGINE_TC_GEMM says); the bias add
// and the bias gradient have CUDA kernels of their own. CPU f32 tensors follow the policy too:
// under tf32 or bf16 the CPU GEMM multiplies copies of both operands rounded as the tensor-core
// GEMM rounds them (every pass: C, dA, dB; y, dx, dW), with its own FP32 accumulation; the bias
// add and db stay FP32 on both devices.
#include <vector>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/linear_internal.h"
#include "engine/ops/op_utils.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul/matmul_mma.h"
#include "kernels/matmul/matmul_wgmma.h"

namespace engine {
namespace {

// op(a) op(b) for contiguous 2-D tensors on one device, where op(t) is t or t^T as stored.
Tensor gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const char* op) {
  int64_t m = trans_a ? a.size(1) : a.size(0);
  int64_t k = trans_a ? a.size(0) : a.size(1);
  int64_t n = trans_b ? b.size(0) : b.size(1);
  Tensor c = Tensor::empty({m, n}, a.dtype(), a.device());
  const Precision policy = precision();
  check_precision_implemented(policy, op);
  if (a.device().is_cuda()) {  // CUDA tensors are always f32
    if (gemm_backend() == GemmBackend::Cublas) {
      kernels::matmul_cublas_precision(m, n, k, a.data<float>(), b.data<float>(), trans_a, trans_b,
                                       c.data<float>(), /*accumulate=*/false, policy);
    } else if (policy != Precision::Fp32 && tensor_core_gemm() == TensorCoreGemm::Mma) {
      kernels::matmul_mma_cuda(m, n, k, a.data<float>(), b.data<float>(), trans_a, trans_b,
                               c.data<float>(), /*accumulate=*/false, policy);
    } else if (policy != Precision::Fp32 && (tensor_core_gemm() == TensorCoreGemm::Wgmma ||
                                             tensor_core_gemm() == TensorCoreGemm::WgmmaOverlap)) {
      kernels::matmul_wgmma_cuda(m, n, k, a.data<float>(), b.data<float>(), trans_a, trans_b,
                                 c.data<float>(), /*accumulate=*/false, policy,
                                 tensor_core_gemm() == TensorCoreGemm::WgmmaOverlap
                                     ? kernels::WgmmaPipeline::kOverlapped
                                     : kernels::WgmmaPipeline::kSerial);
    } else if (policy != Precision::Fp32) {
      kernels::matmul_tensor_core_cuda(m, n, k, a.data<float>(), b.data<float>(), trans_a, trans_b,
                                       c.data<float>(), /*accumulate=*/false, policy);
    } else {
      kernels::matmul_cuda(m, n, k, a.data<float>(), b.data<float>(), trans_a, trans_b,
                           c.data<float>(), /*accumulate=*/false);
    }
    return c;
  }
  // Under tf32 and bf16 the CPU multiplies the operands CUDA's tensor cores would (rounded
  // copies; f32 only), summed in the CPU GEMM's FP32 order.
  const Tensor a_operand = detail::cpu_rounded_operand(a);
  const Tensor b_operand = detail::cpu_rounded_operand(b);
  detail::dispatch_floating(a.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    kernels::matmul_fast_cpu<T>(m, n, k, a_operand.data<T>(), b_operand.data<T>(), trans_a, trans_b,
                                c.data<T>(), /*accumulate=*/false);
  });
  return c;
}

// db[j] = sum_i dy[i, j] for a contiguous dy [m, n].
Tensor column_sums(const Tensor& dy) {
  Tensor db = Tensor::empty({dy.size(1)}, dy.dtype(), dy.device());
  if (dy.device().is_cuda()) {
    kernels::column_sums_cuda(dy.size(0), dy.size(1), dy.data<float>(), db.data<float>());
    return db;
  }
  detail::dispatch_floating(dy.dtype(), "linear", [&](auto zero) {
    using T = decltype(zero);
    kernels::column_sums_cpu<T>(dy.size(0), dy.size(1), dy.data<T>(), db.data<T>());
  });
  return db;
}

}  // namespace

namespace detail {

void check_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_defined(x, "linear", "x");
  check_defined(weight, "linear", "weight");
  check_floating(x, "linear", "x");
  check_dim(x, 2, "linear", "x");
  check_dim(weight, 2, "linear", "weight");
  check_same_kind(x, weight, "linear", "weight");
  ENGINE_CHECK(x.size(1) == weight.size(1), "linear: x is ", shape_str(x.shape()),
               " but weight is ", shape_str(weight.shape()), " (expected weight [out, ", x.size(1),
               "])");
  if (bias.defined()) {
    check_dim(bias, 1, "linear", "bias");
    check_same_kind(x, bias, "linear", "bias");
    ENGINE_CHECK(bias.size(0) == weight.size(0), "linear: bias is ", shape_str(bias.shape()),
                 " but weight is ", shape_str(weight.shape()), " (expected bias [", weight.size(0),
                 "])");
  }
}

Tensor dense(const Tensor& t) { return t.detach().contiguous(); }

std::vector<Tensor> linear_backward(const Tensor& grad, const Tensor& x_dense,
                                    const Tensor& w_dense, const std::vector<bool>& needs) {
  std::vector<Tensor> grads(3);
  Tensor dy = grad.contiguous();
  if (needs[0]) grads[0] = gemm(dy, false, w_dense, false, "linear");  // dy W
  if (needs[1]) grads[1] = gemm(dy, true, x_dense, false, "linear");   // dy^T x
  if (needs[2]) grads[2] = column_sums(dy);
  return grads;
}

}  // namespace detail

Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "matmul", "a");
  detail::check_defined(b, "matmul", "b");
  detail::check_floating(a, "matmul", "a");
  detail::check_dim(a, 2, "matmul", "a");
  detail::check_dim(b, 2, "matmul", "b");
  detail::check_same_kind(a, b, "matmul", "b");
  ENGINE_CHECK(a.size(1) == b.size(0), "matmul: inner dimensions differ: a is ",
               shape_str(a.shape()), " and b is ", shape_str(b.shape()),
               " (expected a [M, K] and b [K, N])");

  Tensor a_dense = detail::dense(a);
  Tensor b_dense = detail::dense(b);
  Tensor c = gemm(a_dense, false, b_dense, false, "matmul");
  if (!needs_tape({a, b})) return c;
  return record("matmul", {a, b}, c,
                [a_dense, b_dense](const Tensor& grad, const std::vector<bool>& needs) {
                  std::vector<Tensor> grads(2);
                  Tensor dc = grad.contiguous();
                  if (needs[0]) grads[0] = gemm(dc, false, b_dense, true, "matmul");  // dC B^T
                  if (needs[1]) grads[1] = gemm(a_dense, true, dc, false, "matmul");  // A^T dC
                  return grads;
                },
                {{"a", a_dense}, {"b", b_dense}});
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  detail::check_linear(x, weight, bias);

  Tensor x_dense = detail::dense(x);
  Tensor w_dense = detail::dense(weight);
  Tensor y = gemm(x_dense, false, w_dense, /*trans_b=*/true, "linear");  // x W^T
  if (bias.defined()) {
    Tensor b_dense = detail::dense(bias);
    if (y.device().is_cuda()) {
      kernels::add_row_bias_cuda(y.size(0), y.size(1), b_dense.data<float>(), y.data<float>());
    } else {
      detail::dispatch_floating(y.dtype(), "linear", [&](auto zero) {
        using T = decltype(zero);
        kernels::add_row_bias_cpu<T>(y.size(0), y.size(1), b_dense.data<T>(), y.data<T>());
      });
    }
  }
  if (!needs_tape({x, weight, bias})) return y;
  return record("linear", {x, weight, bias}, y,
                [x_dense, w_dense](const Tensor& grad, const std::vector<bool>& needs) {
                  return detail::linear_backward(grad, x_dense, w_dense, needs);
                },
                {{"input", x_dense}, {"weight", w_dense}});
}

}  // namespace engine
