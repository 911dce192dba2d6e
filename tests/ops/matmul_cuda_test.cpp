// GEMM on CUDA: our SGEMM and cuBLAS against the f64 CPU reference over odd shapes (not
// multiples of the 128 x 128 x 8 tile), all four transpose combinations and accumulation; the
// linear bias add and column sums; matmul and linear through autograd on CUDA with both GEMM
// backends.
//
// Tolerance: each element of C is a dot product of length k:
// test::reduction_tolerance(k, rms of the reference).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "kernels/matmul/matmul.h"
#include "tests/support/allclose.h"
#include "tests/support/backend_scope.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"
#include "tests/support/tolerance.h"

using engine::Device;
using engine::DType;
using engine::GemmBackend;
using engine::Tensor;
using test::random_f32;
using test::rms;

namespace {

void require_dot_close(const std::vector<double>& actual, const std::vector<double>& expected,
                       int64_t length, const std::string& what) {
  const test::Tolerance tol = test::reduction_tolerance(length, std::max(rms(expected), 1e-3));
  test::require_close(actual, expected, tol.atol, tol.rtol, what);
}

using GemmFn = void (*)(int64_t, int64_t, int64_t, const float*, const float*, bool, bool, float*,
                        bool);

// C (+)= op(A) op(B) at kernel level with `gemm` on device buffers vs matmul_cpu<double>.
void require_gemm_matches_cpu(GemmFn gemm, const char* name, int64_t m, int64_t n, int64_t k,
                              bool trans_a, bool trans_b, bool accumulate, uint64_t seed) {
  std::ostringstream what;
  what << name << " m=" << m << " n=" << n << " k=" << k << " trans_a=" << trans_a
       << " trans_b=" << trans_b << " accumulate=" << accumulate;
  const Tensor a = random_f32({trans_a ? k : m, trans_a ? m : k}, seed);
  const Tensor b = random_f32({trans_b ? n : k, trans_b ? k : n}, seed + 1);
  const Tensor c0 = random_f32({m, n}, seed + 2);
  std::vector<double> a64 = a.to_vector(), b64 = b.to_vector(), expected = c0.to_vector();
  engine::kernels::matmul_cpu<double>(m, n, k, a64.data(), b64.data(), trans_a, trans_b,
                                      expected.data(), accumulate);
  const Tensor a_cuda = a.to(Device::cuda()), b_cuda = b.to(Device::cuda());
  Tensor c = c0.to(Device::cuda());
  gemm(m, n, k, a_cuda.data<float>(), b_cuda.data<float>(), trans_a, trans_b, c.data<float>(),
       accumulate);
  require_dot_close(c.to_vector(), expected, k, what.str());
}

struct GemmShape {
  int64_t m, n, k;
};

const std::vector<GemmShape>& odd_shapes() {
  static const std::vector<GemmShape> shapes = {
      {1, 1, 1},      {7, 5, 3},     {129, 131, 17},  {33, 260, 130},  {200, 3, 9},
      {3, 200, 1000}, {128, 128, 8}, {257, 255, 129}, {112, 512, 1024}};  // the last: a linear
                                                                          // layer of the embedding
                                                                          // head at batch 112
  return shapes;
}

// require_gemm_matches_cpu for every transpose of A and B, overwriting and accumulating; a fresh
// seed for each of the eight.
void require_all_layouts_match_cpu(GemmFn gemm, const char* name, const GemmShape& s,
                                   uint64_t& seed) {
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      for (bool accumulate : {false, true}) {
        require_gemm_matches_cpu(gemm, name, s.m, s.n, s.k, trans_a, trans_b, accumulate, seed);
        seed += 3;
      }
    }
  }
}

}  // namespace

TEST_CASE("matmul cuda: our sgemm matches cpu for odd shapes and all transposes",
          "[matmul][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 1;
  for (const GemmShape& s : odd_shapes()) {
    require_all_layouts_match_cpu(engine::kernels::matmul_cuda, "ours", s, seed);
  }
}

// Small C, long p: split-K (matmul_cuda.cu). The shapes are chosen so the split path is taken
// (checked), with k not a multiple of the chunk or of 8, so the last chunk is short and ragged.
TEST_CASE("matmul cuda: split-K for a small C and a long p matches cpu", "[matmul][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 101;
  for (const GemmShape& s : std::vector<GemmShape>{{40, 70, 6001}, {129, 3, 2053}}) {
    const engine::kernels::SplitK split = engine::kernels::matmul_cuda_splits(s.m, s.n, s.k);
    INFO("m=" << s.m << " n=" << s.n << " k=" << s.k << ": " << split.splits << " chunks of "
              << split.chunk);
    REQUIRE(split.splits > 1);
    REQUIRE(split.chunk % 8 == 0);
    REQUIRE((split.splits - 1) * split.chunk < s.k);
    REQUIRE(split.splits * split.chunk >= s.k);
    require_all_layouts_match_cpu(engine::kernels::matmul_cuda, "ours", s, seed);
  }
  // A C with tiles enough for the GPU, or a short p, stays in one chunk.
  REQUIRE(engine::kernels::matmul_cuda_splits(4096, 4096, 4096).splits == 1);
  REQUIRE(engine::kernels::matmul_cuda_splits(40, 70, 1023).splits == 1);
}

TEST_CASE("matmul cuda: cublas matches cpu for odd shapes and all transposes", "[matmul][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 1;
  for (const GemmShape& s : odd_shapes()) {
    require_all_layouts_match_cpu(engine::kernels::matmul_cublas, "cublas", s, seed);
  }
}

TEST_CASE("matmul cuda: k = 0 gives zeros, or leaves C alone when accumulating", "[matmul][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  for (GemmFn gemm : {engine::kernels::matmul_cuda, engine::kernels::matmul_cublas}) {
    Tensor c = Tensor::full({3, 4}, 2.5, DType::F32, Device::cuda());
    const Tensor a = Tensor::empty({3, 0}, DType::F32, Device::cuda());
    const Tensor b = Tensor::empty({0, 4}, DType::F32, Device::cuda());
    gemm(3, 4, 0, a.data<float>(), b.data<float>(), false, false, c.data<float>(), true);
    REQUIRE(c.to_vector() == std::vector<double>(12, 2.5));
    gemm(3, 4, 0, a.data<float>(), b.data<float>(), false, false, c.data<float>(), false);
    REQUIRE(c.to_vector() == std::vector<double>(12, 0.0));
  }
}

TEST_CASE("matmul cuda: bias add and column sums match cpu", "[matmul][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  for (const GemmShape& s : std::vector<GemmShape>{{1, 1, 0}, {37, 301, 0}, {1000, 3, 0}}) {
    INFO("m=" << s.m << " n=" << s.n);
    const Tensor bias = random_f32({s.n}, 5), c = random_f32({s.m, s.n}, 6);
    std::vector<double> expected = c.to_vector(), bias64 = bias.to_vector();
    engine::kernels::add_row_bias_cpu<double>(s.m, s.n, bias64.data(), expected.data());
    Tensor c_cuda = c.to(Device::cuda());
    const Tensor bias_cuda = bias.to(Device::cuda());
    engine::kernels::add_row_bias_cuda(s.m, s.n, bias_cuda.data<float>(), c_cuda.data<float>());
    const test::Tolerance el = test::elementwise_tolerance();
    test::require_close(c_cuda.to_vector(), expected, el.atol, el.rtol, "add_row_bias_cuda");

    std::vector<double> sums(s.n), c64 = c.to_vector();
    engine::kernels::column_sums_cpu<double>(s.m, s.n, c64.data(), sums.data());
    Tensor db = Tensor::empty({s.n}, DType::F32, Device::cuda());
    engine::kernels::column_sums_cuda(s.m, s.n, c.to(Device::cuda()).data<float>(),
                                      db.data<float>());
    const test::Tolerance tol = test::reduction_tolerance(s.m, std::sqrt(double(s.m)));
    test::require_close(db.to_vector(), sums, tol.atol, tol.rtol, "column_sums_cuda");
  }
}

TEST_CASE("matmul cuda: matmul and linear gradients through autograd, both backends",
          "[matmul][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  for (GemmBackend backend : {GemmBackend::Ours, GemmBackend::Cublas}) {
    test::BackendScope scope(backend);
    const std::string name = engine::backend_name(backend);
    auto leaf = [](const Tensor& t, DType dtype, Device device) {
      Tensor copy = t.to(dtype).to(device).detach();
      copy.set_requires_grad(true);
      return copy;
    };
    // matmul [67, 45] x [45, 130]
    const Tensor a = random_f32({67, 45}, 10), b = random_f32({45, 130}, 11);
    const Tensor dc = random_f32({67, 130}, 12);
    const Tensor a64 = leaf(a, DType::F64, Device::cpu()), b64 = leaf(b, DType::F64, Device::cpu());
    const Tensor ac = leaf(a, DType::F32, Device::cuda()), bc = leaf(b, DType::F32, Device::cuda());
    const Tensor c_ref = engine::matmul(a64, b64), c = engine::matmul(ac, bc);
    REQUIRE(c.device().is_cuda());
    require_dot_close(c.to_vector(), c_ref.to_vector(), 45, name + " matmul forward");
    const auto g_ref = engine::grad({c_ref}, {a64, b64}, {dc.to(DType::F64)});
    const auto g = engine::grad({c}, {ac, bc}, {dc.to(Device::cuda())});
    require_dot_close(g[0].to_vector(), g_ref[0].to_vector(), 130, name + " matmul dA");
    require_dot_close(g[1].to_vector(), g_ref[1].to_vector(), 67, name + " matmul dB");

    // linear: x [33, 300] -> [33, 129]
    const Tensor x = random_f32({33, 300}, 20), w = random_f32({129, 300}, 21);
    const Tensor bias = random_f32({129}, 22), dy = random_f32({33, 129}, 23);
    const Tensor x64 = leaf(x, DType::F64, Device::cpu()), w64 = leaf(w, DType::F64, Device::cpu());
    const Tensor bias64 = leaf(bias, DType::F64, Device::cpu());
    const Tensor xc = leaf(x, DType::F32, Device::cuda()), wc = leaf(w, DType::F32, Device::cuda());
    const Tensor biasc = leaf(bias, DType::F32, Device::cuda());
    const Tensor y_ref = engine::linear(x64, w64, bias64), y = engine::linear(xc, wc, biasc);
    require_dot_close(y.to_vector(), y_ref.to_vector(), 300, name + " linear forward");
    const auto gl_ref = engine::grad({y_ref}, {x64, w64, bias64}, {dy.to(DType::F64)});
    const auto gl = engine::grad({y}, {xc, wc, biasc}, {dy.to(Device::cuda())});
    require_dot_close(gl[0].to_vector(), gl_ref[0].to_vector(), 129, name + " linear dx");
    require_dot_close(gl[1].to_vector(), gl_ref[1].to_vector(), 33, name + " linear dW");
    require_dot_close(gl[2].to_vector(), gl_ref[2].to_vector(), 33, name + " linear db");
  }
}
