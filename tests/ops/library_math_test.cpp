// The reference libraries in the precision policy's math mode (kernels/common/library_math.h):
// the cuBLAS and cuDNN math mode chosen per precision, by the numbers of cublas_api.h and
// cudnn_graph.h; matmul under tf32 with the cuBLAS backend runs (it was refused before issue 33)
// and, on the emulator, in TF32; fp32 with cuBLAS stays strict. Under bf16 (refused until issue
// 33's BF16 references) cuBLAS multiplies operands rounded to BF16 with FP32 accumulation, and
// cuDNN (a GPU build only: the emulator has no cuDNN) convolves them, on hand-worked values.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/common/library_math.h"
#include "kernels/conv2d/conv2d.h"
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

TEST_CASE("library math: cuBLAS and cuDNN modes per precision", "[matmul]") {
  using engine::kernels::cublas_math_mode;
  using engine::kernels::cudnn_math_type;
  // cublas_api.h: CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3.
  CHECK(cublas_math_mode(Precision::Fp32) == 0);
  CHECK(cublas_math_mode(Precision::Tf32) == 3);
  // cudnn_graph.h: CUDNN_DEFAULT_MATH = 0, CUDNN_FMA_MATH = 3 (strict FP32 stays FMA).
  CHECK(cudnn_math_type(Precision::Fp32) == 3);
  CHECK(cudnn_math_type(Precision::Tf32) == 0);
  // bf16: cuBLAS's default math (the BF16 operand types of cublasGemmEx select the tensor
  // cores), cuDNN's CUDNN_TENSOR_OP_MATH = 1, as PyTorch sets for BF16 data.
  CHECK(cublas_math_mode(Precision::Bf16) == 0);
  CHECK(cudnn_math_type(Precision::Bf16) == 1);
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

TEST_CASE("matmul_cublas_precision: tf32 sums exact operands exactly", "[matmul][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const Tensor a = Tensor::full({2, 3}, 1.0, DType::F32, Device::cuda());
  const Tensor b = Tensor::full({3, 2}, 1.0, DType::F32, Device::cuda());
  Tensor c = Tensor::full({2, 2}, 7.0, DType::F32, Device::cuda());
  engine::kernels::matmul_cublas_precision(2, 2, 3, a.data<float>(), b.data<float>(), false, false,
                                           c.data<float>(), false, Precision::Tf32);
  CHECK(c.to_vector() == std::vector<double>(4, 3.0));  // 1 is exact in TF32: 3 ones summed
}

namespace {

double p2(int exponent) { return std::ldexp(1.0, exponent); }

// A [2, 3] and B [3, 2] whose BF16 roundings (7 mantissa bits, ties to even) are, by hand:
//   1 + 2^-8            -> 1           (a tie; 1's last kept bit is even)
//   1 + 3 2^-8          -> 1 + 2^-6    (a tie; 1 + 2^-7 is odd, so up)
//   1 + 2^-8 + 2^-20    -> 1 + 2^-7    (above the tie)
//   -(1 + 2^-8)         -> -1
//   2, 0.5, 1, 0.125, 4 -> themselves
const std::vector<double> kA = {1 + p2(-8),           1 + 3 * p2(-8), 2,
                                1 + p2(-8) + p2(-20), -(1 + p2(-8)),  0.5};
const std::vector<double> kB = {1, 0.125, 1, 1, 1 + p2(-8), 4};
// C = A_bf16 B_bf16, every product and partial sum exact in FP32:
//   C00 = 1 + (1 + 2^-6) + 2                    = 4 + 2^-6
//   C01 = 0.125 + (1 + 2^-6) + 8                = 9.125 + 2^-6
//   C10 = (1 + 2^-7) - 1 + 0.5                  = 0.5 + 2^-7
//   C11 = (1 + 2^-7) 0.125 - 1 + 2              = 1.125 + 2^-10
// (strict FP32 would give C00 = 4 + 6 2^-8, among others).
const std::vector<double> kBf16C = {4 + p2(-6), 9.125 + p2(-6), 0.5 + p2(-7), 1.125 + p2(-10)};

Tensor cuda_matrix(const std::vector<double>& values, int64_t rows, int64_t cols) {
  return Tensor::from_vector(values, {rows, cols}, DType::F32).to(Device::cuda());
}

}  // namespace

TEST_CASE("matmul_cublas_precision: bf16 multiplies BF16-rounded operands, sums in FP32",
          "[matmul][cuda][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  const Tensor a = cuda_matrix(kA, 2, 3), b = cuda_matrix(kB, 3, 2);
  Tensor c = Tensor::full({2, 2}, 7.0, DType::F32, Device::cuda());
  engine::kernels::matmul_cublas_precision(2, 2, 3, a.data<float>(), b.data<float>(), false, false,
                                           c.data<float>(), false, Precision::Bf16);
  CHECK(c.to_vector() == kBf16C);  // the 7s ignored (accumulate = false)
  // Accumulating onto 7: C + 7, still exact in FP32 (C itself is never rounded to BF16).
  Tensor sevens = Tensor::full({2, 2}, 7.0, DType::F32, Device::cuda());
  engine::kernels::matmul_cublas_precision(2, 2, 3, a.data<float>(), b.data<float>(), false, false,
                                           sevens.data<float>(), true, Precision::Bf16);
  std::vector<double> plus_seven = kBf16C;
  for (double& v : plus_seven) v += 7.0;
  CHECK(sevens.to_vector() == plus_seven);
  // The same product from A stored as A^T [3, 2] and B as B^T [2, 3] (trans_a, trans_b): the BF16
  // copies keep each operand's layout, so the leading dimensions are the FP32 call's.
  const Tensor a_t = a.transpose(0, 1).contiguous();
  const Tensor b_t = b.transpose(0, 1).contiguous();
  Tensor c_t = Tensor::full({2, 2}, 7.0, DType::F32, Device::cuda());
  engine::kernels::matmul_cublas_precision(2, 2, 3, a_t.data<float>(), b_t.data<float>(), true,
                                           true, c_t.data<float>(), false, Precision::Bf16);
  CHECK(c_t.to_vector() == kBf16C);
}

TEST_CASE("conv2d cudnn: bf16 convolves BF16-rounded operands, sums in FP32",
          "[conv2d][cuda][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  namespace k = engine::kernels;
  if (k::cudnn_version().empty()) return;  // the emulator has no cuDNN: a GPU build checks this
  // 1 x 1 filter, C = 2 channels, K = 1, a 2 x 2 image. x channel 0 = 1 + 2^-8 (BF16: 1),
  // channel 1 = 1 + 3 2^-8 (BF16: 1 + 2^-6); w = (1 + 3 2^-8, 1 + 2^-8) (BF16: 1 + 2^-6, 1).
  // Every result below has at most 8 significant bits, so cuDNN's BF16 output rounding (its
  // PSEUDO_BFLOAT16 configuration writes y in BF16) keeps it exact.
  k::Conv2dShape s;
  s.N = 1;
  s.C = 2;
  s.H = s.W = 2;
  s.K = 1;
  s.R = s.S = 1;
  const double x0 = 1 + p2(-8), x1 = 1 + 3 * p2(-8);
  const Tensor x = Tensor::from_vector({x0, x0, x0, x0, x1, x1, x1, x1}, {1, 2, 2, 2}, DType::F32)
                       .to(Device::cuda());
  const Tensor w = Tensor::from_vector({x1, x0}, {1, 2, 1, 1}, DType::F32).to(Device::cuda());
  const Tensor bias = Tensor::full({1}, p2(-20), DType::F32, Device::cuda());
  Tensor y = Tensor::empty({1, 1, 2, 2}, DType::F32, Device::cuda());
  // fprop: 1 (1 + 2^-6) + (1 + 2^-6) 1 = 2 + 2^-5, then the FP32 bias 2^-20 added after.
  k::conv2d_fprop_cudnn(s, x.data<float>(), w.data<float>(), bias.data<float>(), y.data<float>(),
                        Precision::Bf16);
  CHECK(y.to_vector() == std::vector<double>(4, 2 + p2(-5) + p2(-20)));
  // dgrad with dy = 1 + 2^-8 (BF16: 1): dx[c] = w[c]: 1 + 2^-6 for channel 0, 1 for channel 1.
  const Tensor dy = Tensor::full({1, 1, 2, 2}, x0, DType::F32, Device::cuda());
  Tensor dx = Tensor::empty({1, 2, 2, 2}, DType::F32, Device::cuda());
  k::conv2d_dgrad_cudnn(s, dy.data<float>(), w.data<float>(), dx.data<float>(), Precision::Bf16);
  const double d0 = 1 + p2(-6);
  CHECK(dx.to_vector() == std::vector<double>{d0, d0, d0, d0, 1, 1, 1, 1});
  // wgrad: dw[c] = sum over the 4 pixels of dy x[c]: 4 for channel 0, 4 + 2^-4 for channel 1;
  // db = the FP32 sum of dy: 4 + 2^-6 (dy not rounded).
  Tensor dw = Tensor::empty({1, 2, 1, 1}, DType::F32, Device::cuda());
  Tensor db = Tensor::empty({1}, DType::F32, Device::cuda());
  k::conv2d_wgrad_cudnn(s, dy.data<float>(), x.data<float>(), dw.data<float>(), db.data<float>(),
                        Precision::Bf16);
  CHECK(dw.to_vector() == std::vector<double>{4, 4 + p2(-4)});
  CHECK(db.to_vector() == std::vector<double>{4 + p2(-6)});
}
