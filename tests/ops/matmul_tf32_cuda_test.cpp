// The TF32 tensor-core GEMM (kernels/matmul/matmul_tensor_core_cuda.cu) against a CPU reference
// that rounds both operands to TF32 first (round to nearest, ties away from zero, as
// cvt.rna.tf32.f32; written here with frexp and std::round, not with the emulator's bit trick)
// and accumulates in double, and against the exact product of the unrounded operands: odd shapes
// (not multiples of the 64 x 64 x 16 tile), all four transposes, overwriting and accumulating; a
// hand-worked 1 x 1 x 1 product whose operands round; the precision dispatch (fp32 is the
// SGEMM's bits); the matmul op under the precision policy (engine/precision.h) on CUDA and on the
// CPU. The tolerances and their reasons are in tensor_core_test_util.h.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/matmul/matmul.h"
#include "tests/ops/tensor_core_test_util.h"
#include "tests/support/backend_scope.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"

using engine::Device;
using engine::DType;
using engine::Tensor;
using engine::kernels::Precision;
using tensor_core_test::PrecisionScope;
using test::random_f32;

namespace {

using tensor_core_test::round_to_tf32;
const tensor_core_test::OperandRounding& kTf32 = tensor_core_test::kTf32Rounding;

// The 1 x 1 product of the hand-worked case: a = 1 + 2^-11, b = 1 + 2^-10 + 2^-11.
Tensor hand_product(const Device& device) {
  const Tensor a = Tensor::full({1, 1}, 1.0 + std::ldexp(1.0, -11), DType::F32, device);
  const Tensor b =
      Tensor::full({1, 1}, 1.0 + std::ldexp(1.0, -10) + std::ldexp(1.0, -11), DType::F32, device);
  return engine::matmul(a, b);
}

// Strict FP32: (1 + 2^-11)(1 + 3 2^-11) = 1 + 2^-9 + 3 2^-22, exact in FP32 (22 bits).
const double kStrictProduct = 1.0 + std::ldexp(1.0, -9) + 3 * std::ldexp(1.0, -22);
// TF32: (1 + 2^-10)(1 + 2^-9) = 1 + 3 2^-10 + 2^-19.
const double kTf32Product = 1.0 + 3 * std::ldexp(1.0, -10) + std::ldexp(1.0, -19);

}  // namespace

TEST_CASE("matmul: CPU f32 tensors round the operands as the tf32 and bf16 kernels do",
          "[matmul][tf32]") {
  CHECK(hand_product(Device::cpu()).to_vector()[0] == kStrictProduct);
  {
    PrecisionScope tf32(Precision::Tf32);
    CHECK(hand_product(Device::cpu()).to_vector()[0] == kTf32Product);
  }
  // Under BF16 both operands round to 1 (2^-10 + 2^-11 is below half of BF16's ulp 2^-7).
  PrecisionScope bf16(Precision::Bf16);
  CHECK(hand_product(Device::cpu()).to_vector()[0] == 1.0);
}

TEST_CASE("matmul cuda: the tf32 policy runs matmul on the tf32 kernel, fp32 stays strict",
          "[matmul][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  CHECK(hand_product(Device::cuda()).to_vector()[0] == kStrictProduct);
  PrecisionScope tf32(Precision::Tf32);
  CHECK(hand_product(Device::cuda()).to_vector()[0] == kTf32Product);
  // cuBLAS runs in the policy's math mode (library_math_test.cpp checks it there).
  test::BackendScope cublas(engine::GemmBackend::Cublas);
  CHECK_NOTHROW(hand_product(Device::cuda()));
}

TEST_CASE("matmul tf32 cuda: matches the tf32-rounded reference for odd shapes, all transposes",
          "[matmul][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  tensor_core_test::require_tensor_core_gemm_matches_over_shapes(Precision::Tf32, kTf32, 7);
}

TEST_CASE("matmul tf32 cuda: operands are rounded to tf32 (cvt.rna), by hand",
          "[matmul][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  // a = 1 + 2^-11 rounds (half way, away from zero) to 1 + 2^-10; b = 1 + 2^-10 + 2^-11 to
  // 1 + 2^-9. a b = 1 + 3 2^-10 + 2^-19, and accumulated onto c = 1: 2 + 3 2^-10 + 2^-19, exact
  // in FP32. In strict FP32 the product would be (1 + 2^-11)(1 + 3 2^-11) instead.
  const double a_value = 1.0 + std::ldexp(1.0, -11);
  const double b_value = 1.0 + std::ldexp(1.0, -10) + std::ldexp(1.0, -11);
  const Tensor a = Tensor::full({1, 1}, a_value, DType::F32, Device::cuda());
  const Tensor b = Tensor::full({1, 1}, b_value, DType::F32, Device::cuda());
  Tensor c = Tensor::full({1, 1}, 1.0, DType::F32, Device::cuda());
  engine::kernels::matmul_tensor_core_cuda(1, 1, 1, a.data<float>(), b.data<float>(), false, false,
                                           c.data<float>(), false, Precision::Tf32);
  CHECK(c.to_vector()[0] == 1.0 + 3 * std::ldexp(1.0, -10) + std::ldexp(1.0, -19));
  Tensor c_accumulated = Tensor::full({1, 1}, 1.0, DType::F32, Device::cuda());
  engine::kernels::matmul_tensor_core_cuda(1, 1, 1, a.data<float>(), b.data<float>(), false, false,
                                           c_accumulated.data<float>(), true, Precision::Tf32);
  CHECK(c_accumulated.to_vector()[0] == 2.0 + 3 * std::ldexp(1.0, -10) + std::ldexp(1.0, -19));
}

TEST_CASE("matmul tf32 cuda: fp32 is the sgemm's bits, k = 0", "[matmul][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  const Tensor a = random_f32({37, 21}, 5).to(Device::cuda());
  const Tensor b = random_f32({21, 45}, 6).to(Device::cuda());
  Tensor strict = Tensor::zeros({37, 45}, DType::F32, Device::cuda());
  Tensor through_policy = Tensor::zeros({37, 45}, DType::F32, Device::cuda());
  engine::kernels::matmul_cuda(37, 45, 21, a.data<float>(), b.data<float>(), false, false,
                               strict.data<float>(), false);
  engine::kernels::matmul_tensor_core_cuda(37, 45, 21, a.data<float>(), b.data<float>(), false,
                                           false, through_policy.data<float>(), false,
                                           Precision::Fp32);
  CHECK(strict.to_vector() == through_policy.to_vector());
  Tensor c = Tensor::full({3, 4}, 2.5, DType::F32, Device::cuda());
  engine::kernels::matmul_tensor_core_cuda(3, 4, 0, a.data<float>(), b.data<float>(), false, false,
                                           c.data<float>(), true, Precision::Tf32);
  CHECK(c.to_vector() == std::vector<double>(12, 2.5));
  engine::kernels::matmul_tensor_core_cuda(3, 4, 0, a.data<float>(), b.data<float>(), false, false,
                                           c.data<float>(), false, Precision::Tf32);
  CHECK(c.to_vector() == std::vector<double>(12, 0.0));
}
