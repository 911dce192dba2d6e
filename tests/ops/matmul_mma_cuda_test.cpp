// The TF32 and BF16 GEMM on mma.sync with a cp.async pipeline (kernels/matmul/matmul_mma_cuda.cu)
// against the CPU reference that rounds both operands to TF32 or BF16 first, within the FP32
// accumulation bound (tests/ops/tensor_core_test_util.h, which says why; BF16 products are exact in
// FP32 too): odd shapes (not multiples of the 128 x 64 x 16 tile, k from 1 to 300 so the
// three-stage pipeline runs empty, full and past its end, and BF16's pairs of p per register end
// half-filled), all four transposes, overwriting and accumulating; 16-byte and 4-byte copies (the
// operands' alignment) giving the same bits; hand-worked 1 x 1 x 1 products whose operands round
// (TF32 half-way cases away from zero, BF16's to even); results that differ from strict FP32;
// k = 0; and the run-time choice ENGINE_TC_GEMM=wmma|mma (engine/backend.h) that routes matmul
// under the tf32 and bf16 policies here.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/common/device_counters.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul/matmul_mma.h"
#include "tests/ops/tensor_core_test_util.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"

using engine::Device;
using engine::DType;
using engine::Tensor;
using engine::TensorCoreGemm;
using engine::kernels::Precision;

using tensor_core_test::on_device_at;
using tensor_core_test::TensorCoreScope;

namespace {

// matmul_mma_cuda in `precision`, with matmul's arguments.
tensor_core_test::DeviceGemm mma_gemm(Precision precision) {
  return [precision](int64_t m, int64_t n, int64_t k, const float* a, const float* b, bool trans_a,
                     bool trans_b, float* c, bool accumulate) {
    engine::kernels::matmul_mma_cuda(m, n, k, a, b, trans_a, trans_b, c, accumulate, precision);
  };
}

// The mma GEMM in `precision` vs the reference rounded by `rounding`, over odd shapes, all four
// transposes, overwriting and accumulating; seeds from `seed` on.
void require_mma_gemm_matches_over_shapes(Precision precision,
                                          const tensor_core_test::OperandRounding& rounding,
                                          uint64_t seed) {
  const std::string label = std::string(engine::precision_name(precision)) + " mma";
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape& s : std::vector<Shape>{{1, 1, 1},
                                           {7, 5, 3},
                                           {128, 64, 16},
                                           {129, 65, 17},
                                           {64, 128, 48},
                                           {33, 130, 40},
                                           {100, 3, 9},
                                           {3, 70, 300},
                                           {200, 72, 36}}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        for (bool accumulate : {false, true}) {
          tensor_core_test::require_gemm_matches_rounded(label, mma_gemm(precision), rounding, s.m,
                                                         s.n, s.k, trans_a, trans_b, accumulate,
                                                         seed);
          seed += 3;
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("matmul mma tf32 cuda: matches the tf32-rounded reference for odd shapes, all transposes",
          "[matmul][cuda][tf32][mma]") {
  REQUIRE_CUDA_OR_SKIP();
  require_mma_gemm_matches_over_shapes(Precision::Tf32, tensor_core_test::kTf32Rounding, 101);
}

TEST_CASE("matmul mma bf16 cuda: matches the bf16-rounded reference for odd shapes, all transposes",
          "[matmul][cuda][bf16][mma]") {
  REQUIRE_CUDA_OR_SKIP();
  require_mma_gemm_matches_over_shapes(Precision::Bf16, tensor_core_test::kBf16Rounding, 701);
}

TEST_CASE("matmul mma bf16 cuda: operands are rounded to bf16 with ties to even, by hand",
          "[matmul][cuda][bf16][mma]") {
  REQUIRE_CUDA_OR_SKIP();
  tensor_core_test::check_bf16_ties_to_even_by_hand(mma_gemm);
}

TEST_CASE("matmul mma bf16 cuda: differs from strict fp32 and from tf32 on random operands",
          "[matmul][cuda][bf16][mma]") {
  REQUIRE_CUDA_OR_SKIP();
  const int64_t m = 33, n = 20, k = 45;
  const Tensor a = test::random_f32({m, k}, 801).to(Device::cuda());
  const Tensor b = test::random_f32({k, n}, 802).to(Device::cuda());
  const auto product = [&](Precision precision) {
    Tensor c = Tensor::zeros({m, n}, DType::F32, Device::cuda());
    if (precision == Precision::Fp32) {
      engine::kernels::matmul_cuda(m, n, k, a.data<float>(), b.data<float>(), false, false,
                                   c.data<float>(), false);
    } else {
      engine::kernels::matmul_mma_cuda(m, n, k, a.data<float>(), b.data<float>(), false, false,
                                       c.data<float>(), false, precision);
    }
    return c.to_vector();
  };
  const std::vector<double> bf16 = product(Precision::Bf16);
  CHECK(bf16 != product(Precision::Fp32));
  CHECK(bf16 != product(Precision::Tf32));
  Tensor c = Tensor::zeros({m, n}, DType::F32, Device::cuda());
  CHECK_THROWS_WITH(
      engine::kernels::matmul_mma_cuda(m, n, k, a.data<float>(), b.data<float>(), false, false,
                                       c.data<float>(), false, Precision::Fp32),
      Catch::Contains("fp32 has no mma.sync kernel"));
}

TEST_CASE("matmul mma cuda: 4-byte copies of misaligned operands give the 16-byte copies' bits",
          "[matmul][cuda][tf32][bf16][mma]") {
  REQUIRE_CUDA_OR_SKIP();
  // Every contiguous length (k = 36, m = 20, n = 24) is a multiple of 4, so aligned operands take
  // the 16-byte copies; the same values one float further into their allocations take 4-byte ones.
  // Both stage the same values, so the products are bit for bit the same, in both precisions
  // (whose row-contiguous stages differ in padding).
  const int64_t m = 20, n = 24, k = 36;
  const std::vector<double> a = test::random_f32({m * k}, 11).to_vector();
  const std::vector<double> b = test::random_f32({k * n}, 12).to_vector();
  const Tensor a_aligned = on_device_at(a, 0), b_aligned = on_device_at(b, 0);
  const Tensor a_shifted = on_device_at(a, 1), b_shifted = on_device_at(b, 1);
  for (const Precision precision : {Precision::Tf32, Precision::Bf16}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        INFO(engine::precision_name(precision) << " trans_a=" << trans_a << " trans_b=" << trans_b);
        Tensor c_aligned = Tensor::zeros({m, n}, DType::F32, Device::cuda());
        Tensor c_shifted = Tensor::zeros({m, n}, DType::F32, Device::cuda());
        engine::kernels::matmul_mma_cuda(m, n, k, a_aligned.data<float>(), b_aligned.data<float>(),
                                         trans_a, trans_b, c_aligned.data<float>(), false,
                                         precision);
        engine::kernels::matmul_mma_cuda(m, n, k, a_shifted.data<float>() + 1,
                                         b_shifted.data<float>() + 1, trans_a, trans_b,
                                         c_shifted.data<float>(), false, precision);
        CHECK(c_aligned.to_vector() == c_shifted.to_vector());
      }
    }
  }
}

TEST_CASE("matmul mma tf32 cuda: operands are rounded to tf32 (cvt.rna) by hand, and k = 0",
          "[matmul][cuda][tf32][mma]") {
  REQUIRE_CUDA_OR_SKIP();
  // a = 1 + 2^-11 rounds (half way, away from zero) to 1 + 2^-10; b = 1 + 2^-10 + 2^-11 to
  // 1 + 2^-9. a b = 1 + 3 2^-10 + 2^-19, and accumulated onto c = 1: 2 + 3 2^-10 + 2^-19, exact
  // in FP32.
  const Tensor a = Tensor::full({1, 1}, 1.0 + std::ldexp(1.0, -11), DType::F32, Device::cuda());
  const Tensor b = Tensor::full({1, 1}, 1.0 + std::ldexp(1.0, -10) + std::ldexp(1.0, -11),
                                DType::F32, Device::cuda());
  Tensor c = Tensor::full({1, 1}, 1.0, DType::F32, Device::cuda());
  engine::kernels::matmul_mma_cuda(1, 1, 1, a.data<float>(), b.data<float>(), false, false,
                                   c.data<float>(), false, Precision::Tf32);
  CHECK(c.to_vector()[0] == 1.0 + 3 * std::ldexp(1.0, -10) + std::ldexp(1.0, -19));
  Tensor c_accumulated = Tensor::full({1, 1}, 1.0, DType::F32, Device::cuda());
  engine::kernels::matmul_mma_cuda(1, 1, 1, a.data<float>(), b.data<float>(), false, false,
                                   c_accumulated.data<float>(), true, Precision::Tf32);
  CHECK(c_accumulated.to_vector()[0] == 2.0 + 3 * std::ldexp(1.0, -10) + std::ldexp(1.0, -19));
  // k = 0: an empty sum leaves C when accumulating and writes zeros otherwise.
  Tensor c_empty = Tensor::full({3, 4}, 2.5, DType::F32, Device::cuda());
  engine::kernels::matmul_mma_cuda(3, 4, 0, a.data<float>(), b.data<float>(), false, false,
                                   c_empty.data<float>(), true, Precision::Tf32);
  CHECK(c_empty.to_vector() == std::vector<double>(12, 2.5));
  engine::kernels::matmul_mma_cuda(3, 4, 0, a.data<float>(), b.data<float>(), false, false,
                                   c_empty.data<float>(), false, Precision::Tf32);
  CHECK(c_empty.to_vector() == std::vector<double>(12, 0.0));
}

TEST_CASE("matmul cuda: ENGINE_TC_GEMM=mma runs tf32 and bf16 matmul on the mma.sync kernel",
          "[matmul][cuda][tf32][bf16][mma]") {
  REQUIRE_CUDA_OR_SKIP();
  const Tensor a = test::random_f32({9, 13}, 21).to(Device::cuda());
  const Tensor b = test::random_f32({13, 6}, 22).to(Device::cuda());
  // The launches of one matmul, by the profiler's labels (the launch check's text).
  const auto launches_of_matmul = [&](TensorCoreGemm gemm, Precision precision) {
    TensorCoreScope scope(gemm, precision);
    engine::kernels::start_profile();
    (void)engine::matmul(a, b);
    std::string labels;
    for (const auto& launch : engine::kernels::stop_profile()) labels += launch.label + "\n";
    return labels;
  };
  for (const Precision precision : {Precision::Tf32, Precision::Bf16}) {
    const std::string name = engine::precision_name(precision);
    INFO(name);
    const std::string with_mma = launches_of_matmul(TensorCoreGemm::Mma, precision);
    CHECK_THAT(with_mma, Catch::Contains("matmul_mma_cuda (" + name + ") m=9 n=6 k=13"));
    CHECK_THAT(with_mma, !Catch::Contains("matmul_tensor_core_cuda"));
    const std::string with_wmma = launches_of_matmul(TensorCoreGemm::Wmma, precision);
    CHECK_THAT(with_wmma, Catch::Contains("matmul_tensor_core_cuda (" + name + ") m=9 n=6 k=13"));
    CHECK_THAT(with_wmma, !Catch::Contains("matmul_mma_cuda"));
  }
}

TEST_CASE("tensor-core gemm: the ENGINE_TC_GEMM spelling", "[matmul][backend][mma]") {
  CHECK(engine::parse_tensor_core_gemm("wmma") == TensorCoreGemm::Wmma);
  CHECK(engine::parse_tensor_core_gemm("mma") == TensorCoreGemm::Mma);
  CHECK(std::string(engine::tensor_core_gemm_name(TensorCoreGemm::Wmma)) == "wmma");
  CHECK(std::string(engine::tensor_core_gemm_name(TensorCoreGemm::Mma)) == "mma");
  CHECK_THROWS_WITH(engine::parse_tensor_core_gemm("MMA", "ENGINE_TC_GEMM"),
                    Catch::Contains("ENGINE_TC_GEMM") &&
                        Catch::Contains("unknown tensor-core GEMM 'MMA'") &&
                        Catch::Contains("'wmma', 'mma', 'wgmma' or 'wgmma-overlap'"));
}
