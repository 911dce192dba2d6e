// linear_relu and linear_l2_normalize on CUDA: the GEMM with the bias and ReLU in its store
// against the unfused CUDA ops (linear, relu, l2_normalize), bit for bit, and against the f64
// CPU reference, over odd shapes, C2F2's fc1 and fc2 at batch 3 and a shape that takes split-K.
//
// Bits: the tile's store rounds acc + bias and applies relu exactly as the separate store,
// add_row_bias and relu kernels do (with split-K the sum of the partials does), and the
// backward is relu's mask or l2_normalize's backward followed by linear's own GEMMs.
// Against f64: reduction_tolerance(k) on y, (n) on dx and (m) on dw, db (matmul_cuda_test.cpp);
// y of linear_l2_normalize is divided by the norm, so its scale is 1.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/matmul/matmul.h"
#include "tests/ops/fused_test_util.h"
#include "tests/ops/tensor_core_test_util.h"
#include "tests/support/allclose.h"
#include "tests/support/backend_scope.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"
#include "tests/support/tolerance.h"

using engine::Device;
using engine::DType;
using engine::Tensor;
using test::random_f32;

namespace {

using fused_test::require_reduction_close;
using fused_test::require_same_bits;

using Fused = Tensor (*)(const Tensor&, const Tensor&, const Tensor&);
Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& b) {
  return engine::linear_relu(x, w, b);
}
Tensor unfused_linear_relu(const Tensor& x, const Tensor& w, const Tensor& b) {
  return engine::relu(engine::linear(x, w, b));
}
Tensor linear_l2_normalize(const Tensor& x, const Tensor& w, const Tensor& b) {
  return engine::linear_l2_normalize(x, w, b);
}
Tensor unfused_linear_l2_normalize(const Tensor& x, const Tensor& w, const Tensor& b) {
  return engine::l2_normalize(engine::linear(x, w, b));
}

void require_fused_matches(Fused fused_op, Fused plain_op, int64_t m, int64_t k, int64_t n,
                           bool bias, uint64_t seed) {
  INFO("m " << m << " k " << k << " n " << n << (bias ? "" : " no bias"));
  const Tensor x = random_f32({m, k}, seed), w = random_f32({n, k}, seed + 1, -0.1, 0.1);
  const Tensor b = bias ? random_f32({n}, seed + 2, -0.1, 0.1) : Tensor();
  const fused_test::LeafSets leaves = fused_test::leaf_sets({x, w, b});
  const std::vector<Tensor>&fused_in = leaves.fused, &plain_in = leaves.plain, &ref_in = leaves.ref;
  auto bias_of = [&](const std::vector<Tensor>& in) { return bias ? in[2] : Tensor(); };
  const Tensor fused = fused_op(fused_in[0], fused_in[1], bias_of(fused_in));
  const Tensor plain = plain_op(plain_in[0], plain_in[1], bias_of(plain_in));
  const Tensor ref = fused_op(ref_in[0], ref_in[1], bias_of(ref_in));
  REQUIRE(fused.device().is_cuda());
  require_same_bits(fused, plain, "forward vs the unfused CUDA ops");
  require_reduction_close(fused, ref, k, "forward vs f64");
  const Tensor dy = random_f32({m, n}, seed + 3);
  const auto g_fused = engine::grad({fused}, fused_in, {dy.to(Device::cuda())});
  const auto g_plain = engine::grad({plain}, plain_in, {dy.to(Device::cuda())});
  const auto g_ref = engine::grad({ref}, ref_in, {dy.to(DType::F64)});
  const std::vector<int64_t> lengths = {n, m, m};
  for (size_t i = 0; i < fused_in.size(); ++i) {
    require_same_bits(g_fused[i], g_plain[i], "gradient " + std::to_string(i) + " vs unfused");
    require_reduction_close(g_fused[i], g_ref[i], lengths[i],
                            "gradient " + std::to_string(i) + " vs f64");
  }
}

}  // namespace

TEST_CASE("linear_relu cuda: fused equals the unfused ops", "[linear_relu][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const test::BackendScope ours(engine::GemmBackend::Ours);
  // m 129, n 3, k 2053 takes split-K (matmul_cuda_test.cpp): the epilogue is in the partials' sum.
  REQUIRE(engine::kernels::matmul_cuda_splits(129, 3, 2053).splits > 1);
  uint64_t seed = 300;
  for (const auto& [m, k, n, bias] :
       std::vector<std::tuple<int64_t, int64_t, int64_t, bool>>{{1, 1, 1, true},
                                                                {5, 7, 3, true},
                                                                {130, 9, 129, false},
                                                                {129, 2053, 3, true},
                                                                {3, 3136, 1024, true}}) {
    require_fused_matches(linear_relu, unfused_linear_relu, m, k, n, bias, seed);
    seed += 4;
  }
}

TEST_CASE("linear_l2_normalize cuda: fused equals the unfused ops", "[linear_l2_normalize][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const test::BackendScope ours(engine::GemmBackend::Ours);
  uint64_t seed = 400;
  for (const auto& [m, k, n, bias] : std::vector<std::tuple<int64_t, int64_t, int64_t, bool>>{
           {1, 1, 1, true}, {5, 7, 3, false}, {129, 17, 131, true}, {3, 1024, 512, true}}) {
    require_fused_matches(linear_l2_normalize, unfused_linear_l2_normalize, m, k, n, bias, seed);
    seed += 4;
  }
}

TEST_CASE("linear_relu and linear_l2_normalize cuda: under tf32 and bf16 they are the unfused ops",
          "[linear_relu][linear_l2_normalize][cuda][tf32][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  // The fused epilogue lives in the strict SGEMM's tile: under a tensor-core precision the ops
  // run unfused, so their linear is the TF32 / BF16 GEMM. Same bits as the unfused ops, forward
  // and backward, and not the strict ones (the rounded operands change the sums).
  const test::BackendScope ours(engine::GemmBackend::Ours);
  uint64_t seed = 500;
  for (engine::Precision precision : {engine::Precision::Tf32, engine::Precision::Bf16}) {
    for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {5, 7, 3}, {129, 17, 131}, {3, 1024, 512}}) {
      INFO(engine::precision_name(precision) << " m " << m << " k " << k << " n " << n);
      const Tensor x = random_f32({m, k}, seed).to(Device::cuda()).set_requires_grad();
      const Tensor w = random_f32({n, k}, seed + 1, -0.1, 0.1).to(Device::cuda());
      const Tensor b = random_f32({n}, seed + 2, -0.1, 0.1).to(Device::cuda());
      const Tensor strict_relu = engine::linear_relu(x, w, b).detach();
      const Tensor strict_l2 = engine::linear_l2_normalize(x, w, b).detach();
      const tensor_core_test::PrecisionScope scope(precision);
      for (const auto& [fused_op, plain_op, strict] : std::vector<std::tuple<Fused, Fused, Tensor>>{
               {linear_relu, unfused_linear_relu, strict_relu},
               {linear_l2_normalize, unfused_linear_l2_normalize, strict_l2}}) {
        const Tensor fused = fused_op(x, w, b), plain = plain_op(x, w, b);
        require_same_bits(fused, plain, "forward vs the unfused ops");
        CHECK(fused.to_vector() != strict.to_vector());
        const Tensor dy = random_f32({m, n}, seed + 3).to(Device::cuda());
        require_same_bits(engine::grad({fused}, {x}, {dy})[0], engine::grad({plain}, {x}, {dy})[0],
                          "dx vs the unfused ops");
      }
      seed += 4;
    }
  }
}
