// The reference libraries in the precision policy's math mode (kernels/common/library_math.h):
// the cuBLAS and cuDNN math mode chosen per precision, by the numbers of cublas_api.h and
// cudnn_graph.h; matmul under tf32 with the cuBLAS backend runs (it was refused before issue 33)
// and, on the emulator, in TF32; fp32 with cuBLAS stays strict.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/common/library_math.h"
#include "kernels/matmul/matmul.h"
#include "tests/support/backend_scope.h"
#include "tests/support/cuda_guard.h"

using engine::Device;
using engine::DType;
using engine::Tensor;
using engine::kernels::Precision;

namespace {

// Sets the process-wide precision policy for one test and puts fp32 back.
struct PolicyScope {
  explicit PolicyScope(Precision precision) { engine::set_precision(precision); }
  ~PolicyScope() { engine::set_precision(Precision::Fp32); }
};

// a = 1 + 2^-11 and b = 1 + 2^-10 + 2^-11 (1 x 1 each) multiplied by engine::matmul.
double hand_product() {
  const Tensor a = Tensor::full({1, 1}, 1.0 + std::ldexp(1.0, -11), DType::F32, Device::cuda());
  const Tensor b = Tensor::full({1, 1}, 1.0 + std::ldexp(1.0, -10) + std::ldexp(1.0, -11),
                                DType::F32, Device::cuda());
  return engine::matmul(a, b).to_vector()[0];
}

// Strict FP32: (1 + 2^-11)(1 + 3 2^-11) = 1 + 2^-9 + 3 2^-22, exact in FP32.
const double kStrictProduct = 1.0 + std::ldexp(1.0, -9) + 3 * std::ldexp(1.0, -22);
// TF32 (operands rounded to 10 mantissa bits, ties away): (1 + 2^-10)(1 + 2^-9)
// = 1 + 3 2^-10 + 2^-19.
const double kTf32Product = 1.0 + 3 * std::ldexp(1.0, -10) + std::ldexp(1.0, -19);

bool emulated() {
  return std::string(engine::kernels::cuda_device_name(0)).find("emulator") != std::string::npos;
}

}  // namespace

TEST_CASE("library math: cuBLAS and cuDNN modes per precision, bf16 refused", "[matmul]") {
  using engine::kernels::cublas_math_mode;
  using engine::kernels::cudnn_math_type;
  // cublas_api.h: CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3.
  CHECK(cublas_math_mode(Precision::Fp32) == 0);
  CHECK(cublas_math_mode(Precision::Tf32) == 3);
  // cudnn_graph.h: CUDNN_DEFAULT_MATH = 0, CUDNN_FMA_MATH = 3 (strict FP32 stays FMA).
  CHECK(cudnn_math_type(Precision::Fp32) == 3);
  CHECK(cudnn_math_type(Precision::Tf32) == 0);
  CHECK_THROWS_WITH(cublas_math_mode(Precision::Bf16),
                    Catch::Contains("cuBLAS") && Catch::Contains("bf16 is not implemented yet"));
  CHECK_THROWS_WITH(cudnn_math_type(Precision::Bf16),
                    Catch::Contains("cuDNN") && Catch::Contains("bf16 is not implemented yet"));
}

TEST_CASE("matmul cuda: tf32 with the cuBLAS backend runs cuBLAS in TF32 math, fp32 stays strict",
          "[matmul][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  test::BackendScope cublas(engine::GemmBackend::Cublas);
  CHECK(hand_product() == kStrictProduct);
  PolicyScope tf32(Precision::Tf32);
  const double product = hand_product();  // refused before issue 33
  // The emulator's cuBLAS rounds the operands in TF32 math; a GPU's cuBLAS may also pick an FFMA
  // kernel for a 1 x 1 x 1 product (the mode allows tensor cores, it does not force them).
  if (emulated()) {
    CHECK(product == kTf32Product);
  } else {
    CHECK((product == kTf32Product || product == kStrictProduct));
  }
  // Back to fp32 on the same thread's handle: strict again (the mode is set on every call).
  engine::set_precision(Precision::Fp32);
  CHECK(hand_product() == kStrictProduct);
}

TEST_CASE("matmul_cublas_precision: bf16 is refused, tf32 sums exact operands exactly",
          "[matmul][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const Tensor a = Tensor::full({2, 3}, 1.0, DType::F32, Device::cuda());
  const Tensor b = Tensor::full({3, 2}, 1.0, DType::F32, Device::cuda());
  Tensor c = Tensor::full({2, 2}, 7.0, DType::F32, Device::cuda());
  CHECK_THROWS_WITH(
      engine::kernels::matmul_cublas_precision(2, 2, 3, a.data<float>(), b.data<float>(), false,
                                               false, c.data<float>(), false, Precision::Bf16),
      Catch::Contains("bf16 is not implemented yet"));
  engine::kernels::matmul_cublas_precision(2, 2, 3, a.data<float>(), b.data<float>(), false, false,
                                           c.data<float>(), false, Precision::Tf32);
  CHECK(c.to_vector() == std::vector<double>(4, 3.0));  // 1 is exact in TF32: 3 ones summed
}
