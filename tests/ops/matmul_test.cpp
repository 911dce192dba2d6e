// matmul and linear: the reference GEMM by hand, Eigen vs the reference, the ops by hand,
// gradient checks, the `needs` mask, errors.
#include <omp.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/common/cpu_gemm.h"
#include "kernels/matmul/matmul.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"

using engine::DType;
using engine::Tensor;

namespace {

std::vector<double> random_values(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> values(static_cast<size_t>(n));
  for (double& v : values) v = uniform(rng);
  return values;
}

// How many elements of two buffers differ in any bit (0: bit-identical); a count, so a failure
// does not print whole buffers.
int64_t count_differing(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return -1;
  int64_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return differing;
}

// Row-major transpose of a [rows, cols] buffer.
std::vector<double> transposed(const std::vector<double>& m, int64_t rows, int64_t cols) {
  std::vector<double> t(m.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = m[i * cols + j];
  }
  return t;
}

}  // namespace

// A = [[1, 2, 3], [4, 5, 6]], B = [[7, 8], [9, 10], [11, 12]]:
//   C[0,0] = 1*7 + 2*9 + 3*11 = 58    C[0,1] = 1*8 + 2*10 + 3*12 = 64
//   C[1,0] = 4*7 + 5*9 + 6*11 = 139   C[1,1] = 4*8 + 5*10 + 6*12 = 154
const std::vector<double> kA = {1, 2, 3, 4, 5, 6};
const std::vector<double> kB = {7, 8, 9, 10, 11, 12};
const std::vector<double> kAB = {58, 64, 139, 154};

TEST_CASE("matmul kernel: the reference loop by hand, every transpose combination", "[matmul]") {
  std::vector<double> a_t = transposed(kA, 2, 3);  // stored [3, 2]
  std::vector<double> b_t = transposed(kB, 3, 2);  // stored [2, 3]
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      std::vector<double> c(4, 0.0);
      engine::kernels::matmul_cpu<double>(2, 2, 3, trans_a ? a_t.data() : kA.data(),
                                          trans_b ? b_t.data() : kB.data(), trans_a, trans_b,
                                          c.data(), false);
      test::require_close(c, kAB, 0.0, 0.0, "matmul_cpu");
    }
  }
  // accumulate: C = 1 + AB
  std::vector<double> c(4, 1.0);
  engine::kernels::matmul_cpu<double>(2, 2, 3, kA.data(), kB.data(), false, false, c.data(), true);
  test::require_close(c, {59, 65, 140, 155}, 0.0, 0.0, "matmul_cpu accumulate");
}

TEST_CASE("matmul kernel: Eigen matches the reference loop on odd shapes", "[matmul]") {
  struct Case {
    int64_t m, n, k;
  };
  for (Case s : {Case{1, 1, 1}, Case{7, 13, 5}, Case{64, 33, 17}}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        for (bool accumulate : {false, true}) {
          std::vector<double> a = random_values(s.m * s.k, 1);
          std::vector<double> b = random_values(s.k * s.n, 2);
          std::vector<double> c_ref = random_values(s.m * s.n, 3);
          std::vector<double> c_fast = c_ref;
          engine::kernels::matmul_cpu<double>(s.m, s.n, s.k, a.data(), b.data(), trans_a, trans_b,
                                              c_ref.data(), accumulate);
          engine::kernels::matmul_fast_cpu<double>(s.m, s.n, s.k, a.data(), b.data(), trans_a,
                                                   trans_b, c_fast.data(), accumulate);
          INFO("m " << s.m << " n " << s.n << " k " << s.k << " trans_a " << trans_a << " trans_b "
                    << trans_b << " accumulate " << accumulate);
          test::require_close(c_fast, c_ref, 1e-10, 1e-10, "matmul_fast_cpu");
        }
      }
    }
  }
}

TEST_CASE("matmul kernel: fast path gives the same bits on one thread and on four", "[matmul]") {
  // 300 x 700 spans several output tiles, with partial ones at both edges; k = 1100 is longer than
  // one block of the inner dimension, whose length is exactly what a threaded GEMM would change.
  const int64_t m = 300, n = 700, k = 1100;
  std::vector<double> a64 = random_values(m * k, 4), b64 = random_values(k * n, 5);
  std::vector<double> c64 = random_values(m * n, 6);
  const std::vector<float> a(a64.begin(), a64.end()), b(b64.begin(), b64.end());
  const std::vector<float> c_start(c64.begin(), c64.end());
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      for (bool accumulate : {false, true}) {
        auto run = [&](int threads) {
          std::vector<float> c = c_start;
          const int saved = omp_get_max_threads();
          omp_set_num_threads(threads);
          engine::kernels::matmul_fast_cpu<float>(m, n, k, a.data(), b.data(), trans_a, trans_b,
                                                  c.data(), accumulate);
          omp_set_num_threads(saved);
          return c;
        };
        INFO("trans_a " << trans_a << " trans_b " << trans_b << " accumulate " << accumulate);
        CHECK(count_differing(run(1), run(4)) == 0);
      }
    }
  }
}

TEST_CASE("matmul kernel: the GEMM blocking uses fixed cache sizes, not the host's", "[matmul]") {
  // Eigen sizes its blocks from the cache sizes it reads from the CPU, and the block length along
  // the inner dimension decides the order of each sum. The fast paths fix the sizes first, so the
  // GEMMs' bits do not depend on the CPU model (kernels/common/cpu_gemm.h). Run alone, as CTest
  // runs it, this fails without that call: this host's Eigen reads an L3 of 320 MiB.
  std::vector<double> c(1);
  const std::vector<double> one = {1.0};
  engine::kernels::matmul_fast_cpu<double>(1, 1, 1, one.data(), one.data(), false, false, c.data(),
                                           false);
  CHECK(Eigen::l1CacheSize() == engine::kernels::kGemmL1CacheBytes);
  CHECK(Eigen::l2CacheSize() == engine::kernels::kGemmL2CacheBytes);
  CHECK(Eigen::l3CacheSize() == engine::kernels::kGemmL3CacheBytes);
}

TEST_CASE("matmul kernel: an empty inner dimension gives zeros", "[matmul]") {
  std::vector<double> c(6, 5.0);
  engine::kernels::matmul_fast_cpu<double>(2, 3, 0, nullptr, nullptr, false, false, c.data(),
                                           false);
  test::require_close(c, std::vector<double>(6, 0.0), 0.0, 0.0, "k = 0");
}

TEST_CASE("matmul: 2x3 times 3x2 by hand, f32 and f64", "[matmul]") {
  for (DType dtype : {DType::F32, DType::F64}) {
    Tensor a = Tensor::from_vector(kA, {2, 3}, dtype);
    Tensor b = Tensor::from_vector(kB, {3, 2}, dtype);
    Tensor c = engine::matmul(a, b);
    REQUIRE(c.shape() == engine::Shape{2, 2});
    REQUIRE(c.dtype() == dtype);
    test::require_close(c, kAB, 0.0, 0.0, "matmul");
  }
}

TEST_CASE("matmul: strided inputs give the same product", "[matmul]") {
  // B^T stored as [2, 3] and transposed back is a non-contiguous view of B.
  Tensor b_t = Tensor::from_vector(transposed(kB, 3, 2), {2, 3}, DType::F64);
  Tensor a = Tensor::from_vector(kA, {2, 3}, DType::F64);
  test::require_close(engine::matmul(a, b_t.transpose(0, 1)), kAB, 0.0, 0.0, "matmul");
}

// x = [[1, 2, 3], [4, 5, 6]], W = [[1, 0, -1], [2, 1, 0]], b = [0.5, -1]:
//   x W^T = [[1 - 3, 2 + 2], [4 - 6, 8 + 5]] = [[-2, 4], [-2, 13]]
//   + b   = [[-1.5, 3], [-1.5, 12]]
TEST_CASE("linear: by hand, with and without bias", "[linear]") {
  Tensor x = Tensor::from_vector(kA, {2, 3}, DType::F64);
  Tensor w = Tensor::from_vector({1, 0, -1, 2, 1, 0}, {2, 3}, DType::F64);
  Tensor b = Tensor::from_vector({0.5, -1}, {2}, DType::F64);
  test::require_close(engine::linear(x, w, Tensor()), {-2, 4, -2, 13}, 0.0, 0.0, "no bias");
  test::require_close(engine::linear(x, w, b), {-1.5, 3, -1.5, 12}, 0.0, 0.0, "bias");
  Tensor y32 = engine::linear(x.to(DType::F32), w.to(DType::F32), b.to(DType::F32));
  REQUIRE(y32.dtype() == DType::F32);
  test::require_close(y32, {-1.5, 3, -1.5, 12}, 0.0, 0.0, "f32");
}

TEST_CASE("matmul grad: both inputs", "[matmul][grad]") {
  Tensor a = test::random_leaf({3, 4}, 1);
  Tensor b = test::random_leaf({4, 2}, 2);
  test::require_gradcheck(
      [](const std::vector<Tensor>& xs) { return engine::matmul(xs[0], xs[1]); }, {a, b});
}

TEST_CASE("matmul grad: transposed (strided) operands", "[matmul][grad]") {
  Tensor a = test::random_leaf({4, 3}, 3);
  Tensor b = test::random_leaf({5, 4}, 4);
  test::require_gradcheck(
      [](const std::vector<Tensor>& xs) {
        return engine::matmul(xs[0].transpose(0, 1), xs[1].transpose(0, 1));
      },
      {a, b});
}

TEST_CASE("linear grad: with bias", "[linear][grad]") {
  Tensor x = test::random_leaf({4, 3}, 5);
  Tensor w = test::random_leaf({2, 3}, 6);
  Tensor b = test::random_leaf({2}, 7);
  test::require_gradcheck(
      [](const std::vector<Tensor>& xs) { return engine::linear(xs[0], xs[1], xs[2]); }, {x, w, b});
}

TEST_CASE("linear grad: without bias", "[linear][grad]") {
  Tensor x = test::random_leaf({3, 5}, 8);
  Tensor w = test::random_leaf({4, 5}, 9);
  test::require_gradcheck(
      [](const std::vector<Tensor>& xs) { return engine::linear(xs[0], xs[1], Tensor()); }, {x, w});
}

TEST_CASE("linear grad: only the requested gradients are computed", "[linear][grad]") {
  Tensor x = test::random_leaf({3, 5}, 10);
  Tensor w = test::random_leaf({4, 5}, 11);
  Tensor b = test::random_leaf({4}, 12);
  engine::GradTrace trace;
  Tensor loss = engine::sum(engine::linear(x, w, b));
  std::vector<Tensor> grads = engine::grad({loss}, {x});
  REQUIRE(trace.contains("linear:0"));
  REQUIRE_FALSE(trace.contains("linear:1"));
  REQUIRE_FALSE(trace.contains("linear:2"));
  // d sum(x W^T + b) / dx[n, i] = sum_o W[o, i]
  std::vector<double> wv = w.to_vector();
  std::vector<double> expected;
  for (int n = 0; n < 3; ++n) {
    for (int i = 0; i < 5; ++i) {
      double column = 0;
      for (int o = 0; o < 4; ++o) column += wv[o * 5 + i];
      expected.push_back(column);
    }
  }
  test::require_close(grads[0], expected, 1e-12, 1e-12, "dx");
}

TEST_CASE("matmul grad: only the requested gradients are computed", "[matmul][grad]") {
  Tensor a = test::random_leaf({2, 3}, 13);
  Tensor b = test::random_leaf({3, 2}, 14);
  engine::GradTrace trace;
  engine::grad({engine::sum(engine::matmul(a, b))}, {b});
  REQUIRE(trace.contains("matmul:1"));
  REQUIRE_FALSE(trace.contains("matmul:0"));
}

TEST_CASE("matmul errors: shapes, ranks and dtypes", "[matmul]") {
  Tensor a = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(engine::matmul(a, Tensor::zeros({4, 2})), Catch::Contains("matmul") &&
                                                                    Catch::Contains("[2, 3]") &&
                                                                    Catch::Contains("[4, 2]"));
  REQUIRE_THROWS_WITH(engine::matmul(a, Tensor::zeros({3})), Catch::Contains("matmul"));
  REQUIRE_THROWS_WITH(engine::matmul(a, Tensor::zeros({3, 2}, DType::F64)),
                      Catch::Contains("matmul"));
  REQUIRE_THROWS_WITH(engine::matmul(Tensor::zeros({2, 3}, DType::I64), Tensor::zeros({3, 2})),
                      Catch::Contains("matmul"));
}

TEST_CASE("linear errors: weight and bias shapes", "[linear]") {
  Tensor x = Tensor::zeros({4, 3});
  REQUIRE_THROWS_WITH(
      engine::linear(x, Tensor::zeros({2, 5}), Tensor()),
      Catch::Contains("linear") && Catch::Contains("[4, 3]") && Catch::Contains("[2, 5]"));
  REQUIRE_THROWS_WITH(engine::linear(x, Tensor::zeros({2, 3}), Tensor::zeros({3})),
                      Catch::Contains("linear") && Catch::Contains("bias"));
  REQUIRE_THROWS_WITH(engine::linear(Tensor::zeros({3}), Tensor::zeros({2, 3}), Tensor()),
                      Catch::Contains("linear"));
}
