#include "engine/ops/op_utils.h"

#include "engine/precision.h"
#include "kernels/operand_round/operand_round.h"

namespace engine::detail {

void check_defined(const Tensor& t, const char* op, const char* arg) {
  ENGINE_CHECK(t.defined(), op, ": argument '", arg, "' is an undefined tensor");
}

void check_floating(const Tensor& t, const char* op, const char* arg) {
  check_defined(t, op, arg);
  ENGINE_CHECK(is_floating(t.dtype()), op, ": argument '", arg, "' must be f32 or f64, got ",
               t.str());
}

void check_dim(const Tensor& t, int64_t expected_dim, const char* op, const char* arg) {
  check_defined(t, op, arg);
  ENGINE_CHECK(t.dim() == expected_dim, op, ": argument '", arg, "' must be ", expected_dim,
               "-D, got shape ", shape_str(t.shape()));
}

void check_same_kind(const Tensor& a, const Tensor& b, const char* op, const char* arg_b) {
  check_defined(b, op, arg_b);
  ENGINE_CHECK(a.device() == b.device(), op, ": argument '", arg_b, "' is on ", b.device().str(),
               " but the other inputs are on ", a.device().str());
  ENGINE_CHECK(a.dtype() == b.dtype(), op, ": argument '", arg_b, "' has dtype ",
               dtype_name(b.dtype()), " but the other inputs have ", dtype_name(a.dtype()));
}

int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op) {
  ENGINE_CHECK(dim >= -ndim && dim < ndim, op, ": dimension ", dim,
               " out of range for a tensor with ", ndim, " dimensions");
  return dim < 0 ? dim + ndim : dim;
}

void check_cpu_only(const Tensor& t, const char* op) {
  ENGINE_CHECK(t.device().is_cpu(), op, ": no CUDA kernel yet for this op (input ", t.str(),
               "); move the tensor to the CPU");
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    ENGINE_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ",
                 shape_str(b), " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool policy_rounds_operands(const Tensor& t) {
  return precision() != Precision::Fp32 && t.dtype() == DType::F32;
}

Tensor cpu_rounded_operand(const Tensor& t) {
  if (!policy_rounds_operands(t)) return t;
  ENGINE_CHECK(t.device().is_cpu() && t.is_contiguous(),
               "cpu_rounded_operand: expected a contiguous CPU tensor, got ", t.str());
  Tensor rounded = Tensor::empty(t.shape(), DType::F32, t.device());
  kernels::round_operands_cpu(precision(), t.numel(), t.data<float>(), rounded.data<float>());
  return rounded;
}

}  // namespace engine::detail
