// Small checks and dispatch shared by the op files. Every failed check names the op, the
// argument and the shapes involved.
#pragma once

#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/tensor.h"

namespace engine::detail {

void check_defined(const Tensor& t, const char* op, const char* arg);
void check_floating(const Tensor& t, const char* op, const char* arg);
void check_dim(const Tensor& t, int64_t expected_dim, const char* op, const char* arg);
// Same device and dtype as the reference tensor `a`.
void check_same_kind(const Tensor& a, const Tensor& b, const char* op, const char* arg_b);
// Maps a possibly negative dim into [0, ndim), or throws.
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op);
// For ops whose CUDA kernel is not written yet: a clear error instead of a wrong answer.
void check_cpu_only(const Tensor& t, const char* op);
// The broadcast shape of a and b (NumPy rules), or an error naming both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Runs fn(float{}) or fn(double{}) by dtype, for CPU kernels templated on the element type:
//   dispatch_floating(x.dtype(), "relu", [&](auto zero) { using T = decltype(zero); ... });
template <typename Fn>
void dispatch_floating(DType dtype, const char* op, Fn&& fn) {
  if (dtype == DType::F32) {
    fn(float{});
  } else if (dtype == DType::F64) {
    fn(double{});
  } else {
    fail(op, ": expected a floating-point tensor (f32 or f64), got ", dtype_name(dtype));
  }
}

// The precision policy (engine/precision.h) on a GEMM's or convolution's operands: whether the
// product rounds them, i.e. the policy is tf32 or bf16 and `t` is f32 (every CUDA tensor, and
// CPU f32 tensors; f64 tensors are the exact reference and never round).
bool policy_rounds_operands(const Tensor& t);
// A CPU product's operand as the policy's tensor cores take it: a new tensor holding contiguous
// `t`'s values rounded by kernels/operand_round (TF32 or BF16, stored as f32), or `t` itself,
// no copy, when policy_rounds_operands(t) is false. The caller's tensor is never modified.
Tensor cpu_rounded_operand(const Tensor& t);

}  // namespace engine::detail
