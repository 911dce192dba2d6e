// The BF16 tensor-core GEMM (kernels/matmul/matmul_tensor_core_cuda.cu, WMMA m16n16k16) against
// a CPU reference that rounds both operands to BF16 first (8 significant bits, round to nearest,
// ties to even, as __float2bfloat16; written here with frexp and std::nearbyint, not with the
// emulator's bit trick, and itself checked on values rounded by hand) and accumulates in double,
// and against the exact product of the unrounded operands: odd shapes (not multiples of the
// 64 x 64 x 16 tile, odd M, N and K), all four transposes, overwriting and accumulating;
// hand-worked 1 x 1 x 1 products whose operands round (a tie to even each way); the matmul op
// under the bf16 policy on CUDA and on the CPU (which rounds the same operands), and with cuBLAS
// (the same BF16 product). The tolerances and their reasons are in tensor_core_test_util.h (BF16's
// products are exact in FP32 too: 8 + 8 significant bits).
#include <catch2/catch.hpp>

#include <cfenv>
#include <cmath>
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

namespace {

using tensor_core_test::round_to_bf16;
const tensor_core_test::OperandRounding& kBf16 = tensor_core_test::kBf16Rounding;

double power_of_two(int exponent) { return std::ldexp(1.0, exponent); }

// C = a b (or c + a b when accumulating) for 1 x 1 matrices, in BF16 on the device.
double bf16_scalar_product(double a_value, double b_value, bool accumulate, double c_value) {
  const Tensor a = Tensor::full({1, 1}, a_value, DType::F32, Device::cuda());
  const Tensor b = Tensor::full({1, 1}, b_value, DType::F32, Device::cuda());
  Tensor c = Tensor::full({1, 1}, c_value, DType::F32, Device::cuda());
  engine::kernels::matmul_tensor_core_cuda(1, 1, 1, a.data<float>(), b.data<float>(), false, false,
                                           c.data<float>(), accumulate, Precision::Bf16);
  return c.to_vector()[0];
}

// The hand-worked operands: a = 1 + 2^-8 is half way between 1 and 1 + 2^-7 and goes to the even
// 1; b = 1 + 3 2^-8 is half way between 1 + 2^-7 (odd) and 1 + 2^-6 (even) and goes up to
// 1 + 2^-6. So in BF16 a b = 1 + 2^-6; strict FP32 keeps every bit:
// (1 + 2^-8)(1 + 3 2^-8) = 1 + 2^-6 + 3 2^-16 (17 bits, exact).
const double kTieDown = 1.0 + power_of_two(-8);
const double kTieUp = 1.0 + 3 * power_of_two(-8);
const double kBf16Product = 1.0 + power_of_two(-6);
const double kStrictProduct = 1.0 + power_of_two(-6) + 3 * power_of_two(-16);

Tensor hand_product(const Device& device) {
  const Tensor a = Tensor::full({1, 1}, kTieDown, DType::F32, device);
  const Tensor b = Tensor::full({1, 1}, kTieUp, DType::F32, device);
  return engine::matmul(a, b);
}

}  // namespace

TEST_CASE("bf16 rounding reference: ties to even, and values rounded by hand", "[matmul][bf16]") {
  REQUIRE(std::fegetround() == FE_TONEAREST);
  // Ties: 1 + 2^-8 to the even 1 (down), 1 + 3 2^-8 to the even 1 + 2^-6 (up), the same mirrored.
  CHECK(round_to_bf16(kTieDown) == 1.0);
  CHECK(round_to_bf16(kTieUp) == kBf16Product);
  CHECK(round_to_bf16(-kTieDown) == -1.0);
  CHECK(round_to_bf16(-kTieUp) == -kBf16Product);
  // Just above a tie goes up: 1 + 2^-8 + 2^-20 -> 1 + 2^-7.
  CHECK(round_to_bf16(1.0 + power_of_two(-8) + power_of_two(-20)) == 1.0 + power_of_two(-7));
  // A tie whose rounding carries into the exponent: 2 - 2^-9 = 1.11111111b (8 ones after the
  // point) keeps 1.1111111b, the dropped bit is exactly half, the kept last bit odd: up to 2.
  CHECK(round_to_bf16(2.0 - power_of_two(-9)) == 2.0);
  // 0.1 = 1.6 2^-4; 1.6 * 2^7 = 204.8 -> 205, so 205 2^-11 = 0.10009765625 (FP32's 0.1,
  // 0x3DCCCCCD, gives the same: its upper half 0x3DCC, the lower 0xCCCD above half, 0x3DCD).
  CHECK(round_to_bf16(double(0.1f)) == 0.10009765625);
  // Exactly representable values stay: 8 significant bits, and a power of two.
  CHECK(round_to_bf16(255.0) == 255.0);
  CHECK(round_to_bf16(power_of_two(-100)) == power_of_two(-100));
  // 257 = 100000001b needs 9 bits: a tie between 256 and 258, to the even 256.
  CHECK(round_to_bf16(257.0) == 256.0);
  CHECK(round_to_bf16(0.0) == 0.0);
}

TEST_CASE("matmul: CPU f32 tensors round the operands to bf16 with ties to even, as on cuda",
          "[matmul][bf16]") {
  CHECK(hand_product(Device::cpu()).to_vector()[0] == kStrictProduct);
  PrecisionScope bf16(Precision::Bf16);
  CHECK(hand_product(Device::cpu()).to_vector()[0] == kBf16Product);
}

TEST_CASE("matmul bf16 cuda: operands are rounded to bf16 with ties to even, by hand",
          "[matmul][cuda][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  CHECK(bf16_scalar_product(kTieDown, kTieUp, false, 5.0) == kBf16Product);
  // Accumulating onto c = 1 (C's old value added in FP32, not rounded): 2 + 2^-6, exact.
  CHECK(bf16_scalar_product(kTieDown, kTieUp, true, 1.0) == 2.0 + power_of_two(-6));
  // 0.1 -> 0.10009765625 = 205 2^-11 and 3 exactly: 615 2^-11, exact in FP32.
  CHECK(bf16_scalar_product(0.1, 3.0, false, 0.0) == 615 * power_of_two(-11));
  // Mirrored: -(1 + 2^-8) ties to the even -1. Ties away from zero (TF32's rule) would give
  // -(1 + 2^-7)(1 + 2^-6) instead.
  CHECK(bf16_scalar_product(-kTieDown, kTieUp, false, 0.0) == -kBf16Product);
}

TEST_CASE("matmul bf16 cuda: matches the bf16-rounded reference for odd shapes, all transposes",
          "[matmul][cuda][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  tensor_core_test::require_tensor_core_gemm_matches_over_shapes(Precision::Bf16, kBf16, 11);
}

TEST_CASE("matmul cuda: the bf16 policy runs matmul and linear on the bf16 kernel",
          "[matmul][cuda][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  CHECK(hand_product(Device::cuda()).to_vector()[0] == kStrictProduct);
  PrecisionScope bf16(Precision::Bf16);
  CHECK(hand_product(Device::cuda()).to_vector()[0] == kBf16Product);
  // linear y = x W^T + b: x W^T is the same BF16 product, the bias added in FP32 afterwards:
  // 1 + 2^-6 + 2^-20, exact in FP32 (21 bits); rounding the bias too would lose 2^-20.
  const Tensor x = Tensor::full({1, 1}, kTieDown, DType::F32, Device::cuda());
  const Tensor w = Tensor::full({1, 1}, kTieUp, DType::F32, Device::cuda());
  const Tensor bias = Tensor::full({1}, power_of_two(-20), DType::F32, Device::cuda());
  CHECK(engine::linear(x, w, bias).to_vector()[0] == kBf16Product + power_of_two(-20));
  // cuBLAS under bf16 (refused before its BF16 path, cublasGemmEx on operands rounded to BF16,
  // existed) computes the same BF16 product, not an FP32 one.
  test::BackendScope cublas(engine::GemmBackend::Cublas);
  CHECK(hand_product(Device::cuda()).to_vector()[0] == kBf16Product);
}

TEST_CASE("matmul bf16 cuda: k = 0 leaves C or zeros it", "[matmul][cuda][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  const Tensor a = test::random_f32({3, 1}, 5).to(Device::cuda());
  Tensor c = Tensor::full({3, 4}, 2.5, DType::F32, Device::cuda());
  engine::kernels::matmul_tensor_core_cuda(3, 4, 0, a.data<float>(), a.data<float>(), false, false,
                                           c.data<float>(), true, Precision::Bf16);
  CHECK(c.to_vector() == std::vector<double>(12, 2.5));
  engine::kernels::matmul_tensor_core_cuda(3, 4, 0, a.data<float>(), a.data<float>(), false, false,
                                           c.data<float>(), false, Precision::Bf16);
  CHECK(c.to_vector() == std::vector<double>(12, 0.0));
}
