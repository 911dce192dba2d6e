// The TF32 and BF16 GEMM on wgmma with a cp.async pipeline (kernels/matmul/matmul_wgmma_cuda.cu)
// against the CPU reference that rounds both operands to TF32 (or BF16) first, within the FP32
// accumulation bound (tests/ops/tensor_core_test_util.h; the same contract as the WMMA and
// mma.sync kernels): odd shapes (not multiples of the 128 x 128 x 16 tile, two warpgroups' rows
// and k from 1 to 300 so the pipelines run empty, full and past their end), all four transposes,
// overwriting and accumulating; 16-byte and 4-byte copies giving the same bits; hand-worked
// 1 x 1 x 1 products whose operands round to nearest (TF32: wgmma alone would truncate them;
// BF16: ties to even); k = 0; fp32 refused; and the run-time choice ENGINE_TC_GEMM=wgmma
// (engine/backend.h) that routes matmul under the tf32 and bf16 policies here. On a device
// without wgmma (compute capability other than 9.0) the kernel refuses with a message.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/common/device_counters.h"
#include "kernels/matmul/matmul_wgmma.h"
#include "tests/ops/tensor_core_test_util.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"

using engine::Device;
using engine::DType;
using engine::Tensor;
using engine::TensorCoreGemm;
using engine::kernels::matmul_wgmma_cuda;
using engine::kernels::Precision;
using engine::kernels::WgmmaPipeline;
using tensor_core_test::on_device_at;
using tensor_core_test::TensorCoreScope;

namespace {

// False, the test marked skipped, where matmul_wgmma_cuda refuses the device -- after checking
// that it does refuse, with the reason.
bool wgmma_available() {
  const std::string reason = engine::kernels::wgmma_unsupported_reason();
  if (reason.empty()) return true;
  const Tensor one = Tensor::full({1, 1}, 1.0, DType::F32, Device::cuda());
  Tensor c = Tensor::zeros({1, 1}, DType::F32, Device::cuda());
  CHECK_THROWS_WITH(matmul_wgmma_cuda(1, 1, 1, one.data<float>(), one.data<float>(), false, false,
                                      c.data<float>(), false, Precision::Tf32),
                    Catch::Contains("matmul_wgmma_cuda") && Catch::Contains(reason));
  WARN("skipped: no CUDA device with wgmma (" << reason << ")");
  return false;
}

// matmul_wgmma_cuda in `precision` with `pipeline`, as a DeviceGemm.
tensor_core_test::DeviceGemm wgmma_gemm(Precision precision,
                                        WgmmaPipeline pipeline = WgmmaPipeline::kSerial) {
  return [precision, pipeline](int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                               bool trans_a, bool trans_b, float* c, bool accumulate) {
    matmul_wgmma_cuda(m, n, k, a, b, trans_a, trans_b, c, accumulate, precision, pipeline);
  };
}

tensor_core_test::DeviceGemm serial_wgmma_gemm(Precision precision) {
  return wgmma_gemm(precision, WgmmaPipeline::kSerial);
}
tensor_core_test::DeviceGemm overlapped_wgmma_gemm(Precision precision) {
  return wgmma_gemm(precision, WgmmaPipeline::kOverlapped);
}

// The wgmma GEMM in `precision` vs the reference rounded by `rounding`, over odd shapes, all four
// transposes, overwriting and accumulating; seeds from `seed` on.
void require_wgmma_gemm_matches_over_shapes(Precision precision,
                                            const tensor_core_test::OperandRounding& rounding,
                                            uint64_t seed,
                                            WgmmaPipeline pipeline = WgmmaPipeline::kSerial) {
  const std::string label = std::string(engine::precision_name(precision)) +
                            (pipeline == WgmmaPipeline::kSerial ? " wgmma" : " wgmma-overlap");
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape& s : std::vector<Shape>{{1, 1, 1},
                                           {7, 5, 3},
                                           {128, 128, 16},
                                           {129, 130, 17},
                                           {65, 9, 48},
                                           {3, 140, 300},
                                           {200, 72, 36}}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        for (bool accumulate : {false, true}) {
          tensor_core_test::require_gemm_matches_rounded(label, wgmma_gemm(precision, pipeline),
                                                         rounding, s.m, s.n, s.k, trans_a, trans_b,
                                                         accumulate, seed);
          seed += 3;
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("matmul wgmma tf32 cuda: matches the tf32-rounded reference for odd shapes, transposes",
          "[matmul][cuda][tf32][wgmma]") {
  REQUIRE_CUDA_OR_SKIP();
  if (!wgmma_available()) return;
  require_wgmma_gemm_matches_over_shapes(Precision::Tf32, tensor_core_test::kTf32Rounding, 301);
}

TEST_CASE("matmul wgmma bf16 cuda: matches the bf16-rounded reference for odd shapes, transposes",
          "[matmul][cuda][bf16][wgmma]") {
  REQUIRE_CUDA_OR_SKIP();
  if (!wgmma_available()) return;
  require_wgmma_gemm_matches_over_shapes(Precision::Bf16, tensor_core_test::kBf16Rounding, 1301);
}

TEST_CASE("matmul wgmma-overlap cuda: one multiply in flight gives the rounded reference too",
          "[matmul][cuda][tf32][bf16][wgmma]") {
  REQUIRE_CUDA_OR_SKIP();
  if (!wgmma_available()) return;
  // The overlapped pipelines (4 TF32 stages; 3 FP32 + 3 BF16 stages; dynamic shared memory past
  // 48 KiB) over the same shapes: k from 1 to 300 runs them empty, full and past their end.
  require_wgmma_gemm_matches_over_shapes(Precision::Tf32, tensor_core_test::kTf32Rounding, 2301,
                                         WgmmaPipeline::kOverlapped);
  require_wgmma_gemm_matches_over_shapes(Precision::Bf16, tensor_core_test::kBf16Rounding, 3301,
                                         WgmmaPipeline::kOverlapped);
  tensor_core_test::check_bf16_ties_to_even_by_hand(overlapped_wgmma_gemm);
}

TEST_CASE("matmul wgmma bf16 cuda: operands are rounded to bf16 with ties to even, by hand",
          "[matmul][cuda][bf16][wgmma]") {
  REQUIRE_CUDA_OR_SKIP();
  if (!wgmma_available()) return;
  tensor_core_test::check_bf16_ties_to_even_by_hand(serial_wgmma_gemm);
  // fp32 is not a tensor-core mode: refused, C untouched.
  const Tensor one = Tensor::full({1, 1}, 1.0, DType::F32, Device::cuda());
  Tensor c = Tensor::full({1, 1}, 7.0, DType::F32, Device::cuda());
  CHECK_THROWS_WITH(matmul_wgmma_cuda(1, 1, 1, one.data<float>(), one.data<float>(), false, false,
                                      c.data<float>(), false, Precision::Fp32),
                    Catch::Contains("tf32 or bf16"));
  CHECK(c.to_vector()[0] == 7.0);
}

TEST_CASE("matmul wgmma cuda: 4-byte copies of misaligned operands give the 16-byte copies' bits",
          "[matmul][cuda][tf32][bf16][wgmma]") {
  REQUIRE_CUDA_OR_SKIP();
  if (!wgmma_available()) return;
  // k = 36 is a multiple of 4, so aligned K-major operands (A untransposed, B transposed) take the
  // 16-byte copies; the same values one float further into their allocations take 4-byte ones.
  // Both stage the same values, so the products are bit for bit the same.
  const int64_t m = 20, n = 24, k = 36;
  for (Precision precision : {Precision::Tf32, Precision::Bf16}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        INFO(engine::precision_name(precision) << " trans_a=" << trans_a << " trans_b=" << trans_b);
        const std::vector<double> a = test::random_f32({m * k}, 31).to_vector();
        const std::vector<double> b = test::random_f32({k * n}, 32).to_vector();
        const Tensor a_aligned = on_device_at(a, 0), b_aligned = on_device_at(b, 0);
        const Tensor a_shifted = on_device_at(a, 1), b_shifted = on_device_at(b, 1);
        Tensor c_aligned = Tensor::zeros({m, n}, DType::F32, Device::cuda());
        Tensor c_shifted = Tensor::zeros({m, n}, DType::F32, Device::cuda());
        matmul_wgmma_cuda(m, n, k, a_aligned.data<float>(), b_aligned.data<float>(), trans_a,
                          trans_b, c_aligned.data<float>(), false, precision);
        matmul_wgmma_cuda(m, n, k, a_shifted.data<float>() + 1, b_shifted.data<float>() + 1,
                          trans_a, trans_b, c_shifted.data<float>(), false, precision);
        CHECK(c_aligned.to_vector() == c_shifted.to_vector());
      }
    }
  }
}

TEST_CASE("matmul wgmma tf32 cuda: operands are rounded to tf32 (cvt.rna) by hand, and k = 0",
          "[matmul][cuda][tf32][wgmma]") {
  REQUIRE_CUDA_OR_SKIP();
  if (!wgmma_available()) return;
  // a = 1 + 2^-11 rounds (half way, away from zero) to 1 + 2^-10, where wgmma's own truncation
  // would give 1; b = 1 + 2^-10 + 2^-11 to 1 + 2^-9 (truncated: 1 + 2^-10). a b = 1 + 3 2^-10 +
  // 2^-19, and accumulated onto c = 1: 2 + 3 2^-10 + 2^-19, exact in FP32.
  const Tensor a = Tensor::full({1, 1}, 1.0 + std::ldexp(1.0, -11), DType::F32, Device::cuda());
  const Tensor b = Tensor::full({1, 1}, 1.0 + std::ldexp(1.0, -10) + std::ldexp(1.0, -11),
                                DType::F32, Device::cuda());
  Tensor c = Tensor::full({1, 1}, 1.0, DType::F32, Device::cuda());
  matmul_wgmma_cuda(1, 1, 1, a.data<float>(), b.data<float>(), false, false, c.data<float>(), false,
                    Precision::Tf32);
  CHECK(c.to_vector()[0] == 1.0 + 3 * std::ldexp(1.0, -10) + std::ldexp(1.0, -19));
  Tensor c_accumulated = Tensor::full({1, 1}, 1.0, DType::F32, Device::cuda());
  matmul_wgmma_cuda(1, 1, 1, a.data<float>(), b.data<float>(), false, false,
                    c_accumulated.data<float>(), true, Precision::Tf32);
  CHECK(c_accumulated.to_vector()[0] == 2.0 + 3 * std::ldexp(1.0, -10) + std::ldexp(1.0, -19));
  // k = 0: an empty sum leaves C when accumulating and writes zeros otherwise.
  Tensor c_empty = Tensor::full({3, 4}, 2.5, DType::F32, Device::cuda());
  matmul_wgmma_cuda(3, 4, 0, a.data<float>(), b.data<float>(), false, false, c_empty.data<float>(),
                    true, Precision::Tf32);
  CHECK(c_empty.to_vector() == std::vector<double>(12, 2.5));
  matmul_wgmma_cuda(3, 4, 0, a.data<float>(), b.data<float>(), false, false, c_empty.data<float>(),
                    false, Precision::Tf32);
  CHECK(c_empty.to_vector() == std::vector<double>(12, 0.0));
}

TEST_CASE("matmul cuda: ENGINE_TC_GEMM=wgmma runs tf32 and bf16 matmul on the wgmma kernel",
          "[matmul][cuda][tf32][bf16][wgmma]") {
  REQUIRE_CUDA_OR_SKIP();
  if (!wgmma_available()) return;
  const Tensor a = test::random_f32({9, 13}, 41).to(Device::cuda());
  const Tensor b = test::random_f32({13, 6}, 42).to(Device::cuda());
  for (Precision precision : {Precision::Tf32, Precision::Bf16}) {
    const std::string name = engine::precision_name(precision);
    INFO(name);
    TensorCoreScope scope(TensorCoreGemm::Wgmma, precision);
    engine::kernels::start_profile();
    (void)engine::matmul(a, b);
    std::string labels;
    for (const auto& launch : engine::kernels::stop_profile()) labels += launch.label + "\n";
    CHECK_THAT(labels, Catch::Contains("matmul_wgmma_cuda (" + name + ") m=9 n=6 k=13"));
    engine::set_tensor_core_gemm(TensorCoreGemm::WgmmaOverlap);
    engine::kernels::start_profile();
    (void)engine::matmul(a, b);
    for (const auto& launch : engine::kernels::stop_profile()) labels += launch.label + "\n";
    CHECK_THAT(labels,
               Catch::Contains("matmul_wgmma_cuda (" + name + ", overlapped) m=9 n=6 k=13"));
    CHECK_THAT(labels, !Catch::Contains("matmul_tensor_core_cuda"));
    CHECK_THAT(labels, !Catch::Contains("matmul_mma_cuda"));
  }
}

TEST_CASE("tensor-core gemm: ENGINE_TC_GEMM=wgmma and wgmma-overlap are spelled so",
          "[matmul][backend][wgmma]") {
  CHECK(engine::parse_tensor_core_gemm("wgmma") == TensorCoreGemm::Wgmma);
  CHECK(std::string(engine::tensor_core_gemm_name(TensorCoreGemm::Wgmma)) == "wgmma");
  CHECK(engine::parse_tensor_core_gemm("wgmma-overlap") == TensorCoreGemm::WgmmaOverlap);
  CHECK(std::string(engine::tensor_core_gemm_name(TensorCoreGemm::WgmmaOverlap)) ==
        "wgmma-overlap");
}
