// Philox4x32-10 known answers and the device-independent random streams.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "engine/random.h"
#include "kernels/random/philox.h"
#include "tests/support/cuda_guard.h"

using namespace engine;

TEST_CASE("philox: known-answer vectors of Random123", "[random]") {
  // kat_vectors of the Random123 distribution, philox4x32 with 10 rounds.
  kernels::PhiloxBlock zero = kernels::philox4x32_10(0, 0, 0);
  REQUIRE(zero.word[0] == 0x6627e8d5u);
  REQUIRE(zero.word[1] == 0xe169c58du);
  REQUIRE(zero.word[2] == 0xbc57ac4cu);
  REQUIRE(zero.word[3] == 0x9b00dbd8u);
  kernels::PhiloxBlock ones = kernels::philox4x32_10(~uint64_t(0), ~uint64_t(0), ~uint64_t(0));
  REQUIRE(ones.word[0] == 0x408f276du);
  REQUIRE(ones.word[1] == 0x41c83b0eu);
  REQUIRE(ones.word[2] == 0xa20bc7c6u);
  REQUIRE(ones.word[3] == 0x6d5451fdu);
  // counter words (lo..hi) = 243f6a88 85a308d3 13198a2e 03707344, key = a4093822 299f31d0.
  kernels::PhiloxBlock pi =
      kernels::philox4x32_10(0x85a308d3243f6a88ull, 0x0370734413198a2eull, 0x299f31d0a4093822ull);
  REQUIRE(pi.word[0] == 0xd16cfe09u);
  REQUIRE(pi.word[1] == 0x94fdccebu);
  REQUIRE(pi.word[2] == 0x5001e420u);
  REQUIRE(pi.word[3] == 0x24126ea1u);
}

TEST_CASE("random: uniform is reproducible, in range, and f32/f64 agree", "[random]") {
  Generator a(42), b(42);
  Tensor x = uniform({1000}, -2.0, 3.0, a);
  Tensor y = uniform({1000}, -2.0, 3.0, b, DType::F64);
  std::vector<double> xs = x.to_vector(), ys = y.to_vector();
  double mean = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    REQUIRE(xs[i] >= -2.0);
    REQUIRE(xs[i] < 3.0);
    REQUIRE(std::fabs(xs[i] - ys[i]) <= 1e-6);
    mean += xs[i] / xs.size();
  }
  REQUIRE(std::fabs(mean - 0.5) < 0.15);  // 5 sigma for n = 1000, sd 1.44
  REQUIRE(a.offset == 250);
  Tensor z = uniform({1000}, -2.0, 3.0, a);  // the stream moved on
  REQUIRE(z.to_vector() != xs);
}

TEST_CASE("random: normal has mean 0 and variance 1", "[random]") {
  Generator gen(7);
  std::vector<double> v = normal({200000}, 0.0, 1.0, gen).to_vector();
  double mean = 0, var = 0;
  for (double x : v) mean += x / v.size();
  for (double x : v) var += (x - mean) * (x - mean) / v.size();
  REQUIRE(std::fabs(mean) < 0.012);       // 5 sigma: 5/sqrt(200000) = 0.011
  REQUIRE(std::fabs(var - 1.0) < 0.016);  // 5 sigma: 5*sqrt(2/200000) = 0.016
}

TEST_CASE("random: randint covers the range uniformly", "[random]") {
  Generator gen(3);
  std::vector<int64_t> v = randint({60000}, -2, 4, gen).to_indices();
  std::vector<int> counts(6, 0);
  for (int64_t x : v) {
    REQUIRE(x >= -2);
    REQUIRE(x < 4);
    counts[x + 2]++;
  }
  for (int c : counts) REQUIRE(std::abs(c - 10000) < 500);  // ~5 sigma
}

TEST_CASE("random: permutation is a permutation and depends on the seed", "[random]") {
  Generator g1(5), g2(5), g3(6);
  std::vector<int64_t> p1 = permutation_vector(1000, g1);
  std::vector<int64_t> p2 = permutation_vector(1000, g2);
  std::vector<int64_t> p3 = permutation_vector(1000, g3);
  REQUIRE(p1 == p2);
  REQUIRE(p1 != p3);
  std::set<int64_t> values(p1.begin(), p1.end());
  REQUIRE(values.size() == 1000);
  REQUIRE(*values.begin() == 0);
  REQUIRE(*values.rbegin() == 999);
  // Position 0 of a uniform permutation of 0..3 takes each value ~1/4 of the time.
  std::vector<int> first(4, 0);
  Generator gen(11);
  for (int t = 0; t < 8000; ++t) first[permutation_vector(4, gen)[0]]++;
  for (int c : first) REQUIRE(std::abs(c - 2000) < 200);
}

TEST_CASE("random cuda: uniform and normal streams equal the cpu streams", "[random][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  for (int64_t n : {1, 3, 4, 5, 1023, 100001}) {
    Generator cpu_gen(99), gpu_gen(99);
    Tensor u_cpu = uniform({n}, 0.0, 1.0, cpu_gen);
    Tensor u_gpu = uniform({n}, 0.0, 1.0, gpu_gen, DType::F32, Device::cuda());
    REQUIRE(u_gpu.to_vector() == u_cpu.to_vector());  // same bits: (word >> 8) * 2^-24
    Tensor z_cpu = normal({n}, 0.0, 1.0, cpu_gen);
    Tensor z_gpu = normal({n}, 0.0, 1.0, gpu_gen, DType::F32, Device::cuda());
    std::vector<double> a = z_cpu.to_vector(), b = z_gpu.to_vector();
    for (int64_t i = 0; i < n; ++i) REQUIRE(std::fabs(a[i] - b[i]) <= 1e-5);  // libm vs CUDA
    REQUIRE(cpu_gen.offset == gpu_gen.offset);
  }
}
