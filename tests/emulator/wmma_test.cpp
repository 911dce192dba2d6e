// The emulator's WMMA (tests/support/cuda_emulator/include/mma.h): the TF32 and BF16 roundings,
// one matrix instruction of small integers in every layout against products worked by hand, and
// the mistakes it must catch (an assumed fragment layout, an operand not converted to TF32, a
// misaligned pointer, a partial warp). Runs with emulator_test (label cpu).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <cuda_bf16.h>
#include <mma.h>

#include "tests/emulator/wmma_kernels.h"

namespace {

// Device memory holding `values`, freed at scope exit.
template <typename T>
struct Device {
  T* ptr = nullptr;
  explicit Device(const std::vector<T>& values) {
    void* memory = nullptr;
    REQUIRE(cudaMalloc(&memory, sizeof(T) * values.size()) == cudaSuccess);
    ptr = static_cast<T*>(memory);
    REQUIRE(cudaMemcpy(ptr, values.data(), sizeof(T) * values.size(), cudaMemcpyHostToDevice) ==
            cudaSuccess);
  }
  ~Device() { cudaFree(ptr); }
  std::vector<T> read(size_t count) const {
    std::vector<T> host(count);
    REQUIRE(cudaMemcpy(host.data(), ptr, sizeof(T) * count, cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }
};

struct ResetErrors {
  ResetErrors() { emu::reset_errors(); }
  ~ResetErrors() { emu::reset_errors(); }
};

// rows x cols matrix with element (r, c) = f(r, c), stored row- or column-major.
template <typename F>
std::vector<float> matrix(int rows, int cols, bool col_major, F f) {
  std::vector<float> m(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) m[col_major ? c * rows + r : r * cols + c] = float(f(r, c));
  }
  return m;
}

const float kTwo10 = std::ldexp(1.0f, -10), kTwo11 = std::ldexp(1.0f, -11);

}  // namespace

TEST_CASE("emulator: __float_to_tf32 rounds to 10 mantissa bits, ties away from zero",
          "[emulator]") {
  using nvcuda::wmma::__float_to_tf32;
  // The TF32 neighbours of 1 are 1 and 1 + 2^-10: 1 + 2^-11 is exactly half way and goes up
  // (away from zero), where round-to-even and truncation would both give 1.
  CHECK(__float_to_tf32(1.0f + kTwo11) == 1.0f + kTwo10);
  CHECK(__float_to_tf32(-(1.0f + kTwo11)) == -(1.0f + kTwo10));
  // 1 + 2^-10 + 2^-11: half way between 1 + 2^-10 and 1 + 2^-9; goes up to 1 + 2^-9.
  CHECK(__float_to_tf32(1.0f + kTwo10 + kTwo11) == 1.0f + 2 * kTwo10);
  // Below half an ulp: down.
  CHECK(__float_to_tf32(1.0f + std::ldexp(1.0f, -12)) == 1.0f);
  CHECK(__float_to_tf32(1.0f + kTwo10 + std::ldexp(1.0f, -12)) == 1.0f + kTwo10);
  // Just above half an ulp (1 + 2^-11 + 2^-23): up.
  CHECK(__float_to_tf32(1.0f + kTwo11 + std::ldexp(1.0f, -23)) == 1.0f + kTwo10);
  // Exact TF32 values stay; the largest float rounds past the largest TF32 to infinity.
  CHECK(__float_to_tf32(3.0f) == 3.0f);
  CHECK(__float_to_tf32(0.0f) == 0.0f);
  CHECK(std::isinf(__float_to_tf32(3.4028235e38f)));
  CHECK(std::isnan(__float_to_tf32(std::nanf(""))));
}

TEST_CASE("emulator: __float2bfloat16 rounds to 7 mantissa bits, ties to even", "[emulator]") {
  const auto bf16 = [](float x) { return __bfloat162float(__float2bfloat16(x)); };
  // The bfloat16 neighbours of 1 are 1 and 1 + 2^-7; 1 + 2^-8 is half way and goes to the even
  // one, 1. 1 + 2^-7 + 2^-8 is half way between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  CHECK(bf16(1.0f + std::ldexp(1.0f, -8)) == 1.0f);
  CHECK(bf16(1.0f + std::ldexp(1.0f, -7) + std::ldexp(1.0f, -8)) == 1.0f + std::ldexp(1.0f, -6));
  CHECK(bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 1.0f + std::ldexp(1.0f, -7));
  CHECK(bf16(-2.5f) == -2.5f);
  CHECK(std::isnan(bf16(std::nanf(""))));
}

TEST_CASE("emulator: a TF32 m16n16k8 mma_sync of small integers, every layout", "[emulator]") {
  ResetErrors reset;
  // A[i][p] = i + p, B[p][j] = p - j, C[i][j] = 100 i + j. By hand, with sum_{p<8} p = 28 and
  // sum_{p<8} p^2 = 140: (A B)[i][j] = sum_p (i + p)(p - j) = 28 i - 8 i j + 140 - 28 j.
  for (const bool a_col : {false, true}) {
    for (const bool b_col : {false, true}) {
      for (const bool c_col : {false, true}) {
        Device<float> a(matrix(16, 8, a_col, [](int i, int p) { return i + p; }));
        Device<float> b(matrix(8, 16, b_col, [](int p, int j) { return p - j; }));
        Device<float> c(matrix(16, 16, c_col, [](int i, int j) { return 100 * i + j; }));
        Device<float> d(std::vector<float>(256, 0.0f));
        REQUIRE(sample::wmma_tf32(a.ptr, a_col, b.ptr, b_col, c.ptr, c_col, d.ptr, true, 32) ==
                cudaSuccess);
        const std::vector<float> got = d.read(256);
        for (int i = 0; i < 16; ++i) {
          for (int j = 0; j < 16; ++j) {
            INFO("a_col " << a_col << " b_col " << b_col << " c_col " << c_col << " at " << i
                          << ", " << j);
            CHECK(got[i * 16 + j] == float(100 * i + j + 28 * i - 8 * i * j + 140 - 28 * j));
          }
        }
      }
    }
  }
}

TEST_CASE("emulator: a BF16 m16n16k16 mma_sync of small integers", "[emulator]") {
  ResetErrors reset;
  // A[i][p] = i + p, B[p][j] = p - j over p < 16 (sum p = 120, sum p^2 = 1240), C[i][j] = i - j:
  // D[i][j] = i - j + 120 i - 16 i j + 1240 - 120 j. Every value is exact in BF16 (|x| <= 30).
  const auto to_bf16 = [](const std::vector<float>& values) {
    std::vector<__nv_bfloat16> out;
    for (float v : values) out.push_back(__float2bfloat16(v));
    return out;
  };
  Device<__nv_bfloat16> a(to_bf16(matrix(16, 16, false, [](int i, int p) { return i + p; })));
  Device<__nv_bfloat16> b(to_bf16(matrix(16, 16, false, [](int p, int j) { return p - j; })));
  Device<float> c(matrix(16, 16, false, [](int i, int j) { return i - j; }));
  Device<float> d(std::vector<float>(256, 0.0f));
  REQUIRE(sample::wmma_bf16(a.ptr, b.ptr, c.ptr, d.ptr) == cudaSuccess);
  const std::vector<float> got = d.read(256);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      INFO("at " << i << ", " << j);
      CHECK(got[i * 16 + j] == float(i - j + 120 * i - 16 * i * j + 1240 - 120 * j));
    }
  }
}

TEST_CASE("emulator: TF32 operands must be converted, the product of converted ones is exact",
          "[emulator]") {
  ResetErrors reset;
  // A[0][0] = 1 + 2^-11 -> 1 + 2^-10; B[0][0] = 1 + 2^-10 + 2^-11 -> 1 + 2^-9; all else 0.
  // D[0][0] = (1 + 2^-10)(1 + 2^-9) = 1 + 3 2^-10 + 2^-19 (exact in FP32), every other D zero.
  std::vector<float> a_host(128, 0.0f), b_host(128, 0.0f);
  a_host[0] = 1.0f + kTwo11;
  b_host[0] = 1.0f + kTwo10 + kTwo11;
  Device<float> a(a_host), b(b_host), c(std::vector<float>(256, 0.0f));
  Device<float> d(std::vector<float>(256, -1.0f));
  REQUIRE(sample::wmma_tf32(a.ptr, false, b.ptr, false, c.ptr, false, d.ptr, true, 32) ==
          cudaSuccess);
  const std::vector<float> got = d.read(256);
  CHECK(got[0] == 1.0f + 3 * kTwo10 + std::ldexp(1.0f, -19));
  for (int e = 1; e < 256; ++e) CHECK(got[e] == 0.0f);
  // Without __float_to_tf32 the operands keep bits TF32 does not have: a launch failure.
  CHECK(sample::wmma_tf32(a.ptr, false, b.ptr, false, c.ptr, false, d.ptr, false, 32) ==
        cudaErrorLaunchFailure);
  emu::reset_errors();  // before the buffers are freed
}

TEST_CASE("emulator: the scrambled fragment layout catches an epilogue that assumes one",
          "[emulator]") {
  ResetErrors reset;
  // The same product of small integers as above, with C = 0; the correct kernel (store_matrix_
  // sync) gives it, the planted one (x[i] written where a GPU's layout might put it) does not.
  Device<float> a(matrix(16, 8, false, [](int i, int p) { return i + p; }));
  Device<float> b(matrix(8, 16, false, [](int p, int j) { return p - j; }));
  Device<float> c(std::vector<float>(256, 0.0f));
  Device<float> d(std::vector<float>(256, 0.0f));
  REQUIRE(sample::wmma_tf32(a.ptr, false, b.ptr, false, c.ptr, false, d.ptr, true, 32) ==
          cudaSuccess);
  const std::vector<float> right = d.read(256);
  REQUIRE(sample::wmma_assumed_layout(a.ptr, b.ptr, d.ptr) == cudaSuccess);
  const std::vector<float> planted = d.read(256);
  int wrong = 0;
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      CHECK(right[i * 16 + j] == float(28 * i - 8 * i * j + 140 - 28 * j));
      wrong += planted[i * 16 + j] != right[i * 16 + j];
    }
  }
  CHECK(wrong > 200);  // almost every element lands elsewhere
}

TEST_CASE("emulator: WMMA needs 32-byte aligned pointers and the whole warp", "[emulator]") {
  ResetErrors reset;
  Device<float> a(std::vector<float>(256, 1.0f)), d(std::vector<float>(32, 0.0f));
  CHECK(sample::wmma_load(a.ptr, 8, d.ptr) == cudaSuccess);             // 32 bytes in
  CHECK(sample::wmma_load(a.ptr, 4, d.ptr) == cudaErrorLaunchFailure);  // 16 bytes in
  emu::reset_errors();
  Device<float> b(std::vector<float>(128, 1.0f)), c(std::vector<float>(256, 0.0f));
  Device<float> out(std::vector<float>(256, 0.0f));
  CHECK(sample::wmma_tf32(a.ptr, false, b.ptr, false, c.ptr, false, out.ptr, true, 16) ==
        cudaErrorLaunchFailure);  // half a warp at mma_sync
  emu::reset_errors();            // before the buffers are freed
}
