// The one-instruction layout tests of mma.sync.m16n8k8 with TF32 operands and mma.sync.m16n8k16
// with BF16 ones (kernels/common/mma_sync.cuh): one warp runs one instruction on registers the test
// fills, and the test reads each lane's d registers back (kernels::mma_*_registers_cuda, kernels
// with no layout of their own). On a GPU this checks the PTX ISA's fragment layouts, as written out
// below from the document ("Matrix Fragments for mma.m16n8k8" and "... mma.m16n8k16 with floating
// point type"), against the hardware, before any kernel that relies on them is trusted
// (tools/gpu_check.sh runs it first); on the CPU emulator it checks the emulator's instructions
// against the same document. With g = lane / 4 and t = lane % 4:
//   TF32  A register i of lane l holds A(g + 8 (i % 2), t + 4 (i / 2)), B register i B(t + 4 i, g)
//   BF16  A element e (register e / 2, the low half for even e) is
//         A(g + 8 ((e / 2) % 2), 2t + e % 2 + 8 (e / 4)), B element e B(2t + e % 2 + 8 (e / 2), g)
//   both  C and D register i: (g + 8 (i / 2), 2 t + i % 2)
// All values are small integers or chosen by hand, so every sum is exact in FP32 and the results
// do not depend on the order in which a tensor core adds.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/tensor.h"
#include "kernels/matmul/matmul_mma.h"
#include "tests/support/cuda_guard.h"

using engine::Device;
using engine::DType;
using engine::Tensor;

namespace {

struct Element {
  int row, col;
};
Element a_element(int lane, int i) { return {lane / 4 + 8 * (i % 2), lane % 4 + 4 * (i / 2)}; }
Element b_element(int lane, int i) { return {lane % 4 + 4 * i, lane / 4}; }
Element bf16_a_element(int lane, int e) {
  return {lane / 4 + 8 * (e / 2 % 2), 2 * (lane % 4) + e % 2 + 8 * (e / 4)};
}
Element bf16_b_element(int lane, int e) { return {2 * (lane % 4) + e % 2 + 8 * (e / 2), lane / 4}; }
Element cd_element(int lane, int i) { return {lane / 4 + 8 * (i / 2), 2 * (lane % 4) + i % 2}; }

// Runs the instruction on the registers given (4, 2 and 4 per lane) and returns d's (4 per lane).
std::vector<double> run_instruction(const std::vector<double>& a_registers,
                                    const std::vector<double>& b_registers,
                                    const std::vector<double>& c_registers) {
  const Device cuda = Device::cuda();
  const Tensor a = Tensor::from_vector(a_registers, {128}, DType::F32).to(cuda);
  const Tensor b = Tensor::from_vector(b_registers, {64}, DType::F32).to(cuda);
  const Tensor c = Tensor::from_vector(c_registers, {128}, DType::F32).to(cuda);
  Tensor d = Tensor::zeros({128}, DType::F32, cuda);
  engine::kernels::mma_m16n8k8_tf32_registers_cuda(a.data<float>(), b.data<float>(),
                                                   c.data<float>(), d.data<float>());
  return d.to_vector();
}

// The BF16 instruction: a holds 8 elements per lane (4 registers of 2), b 4 (2 of 2).
std::vector<double> run_bf16_instruction(const std::vector<double>& a_elements,
                                         const std::vector<double>& b_elements,
                                         const std::vector<double>& c_registers) {
  const Device cuda = Device::cuda();
  const Tensor a = Tensor::from_vector(a_elements, {256}, DType::F32).to(cuda);
  const Tensor b = Tensor::from_vector(b_elements, {128}, DType::F32).to(cuda);
  const Tensor c = Tensor::from_vector(c_registers, {128}, DType::F32).to(cuda);
  Tensor d = Tensor::zeros({128}, DType::F32, cuda);
  engine::kernels::mma_m16n8k16_bf16_registers_cuda(a.data<float>(), b.data<float>(),
                                                    c.data<float>(), d.data<float>());
  return d.to_vector();
}

}  // namespace

TEST_CASE("mma.sync m16n8k8 tf32: one product placed by hand, and cvt.rna rounding",
          "[mma][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  std::vector<double> a(128, 0.0), b(64, 0.0), c(128, 0.0);
  // A(3, 5) = 1: g = 3, t + 4 = 5, so lane 4 g + t = 13, register a2 (row g, column t + 4).
  a[4 * 13 + 2] = 1.0;
  // B(5, 6) = 2: t + 4 = 5, g = 6, so lane 25, register b1.
  b[2 * 25 + 1] = 2.0;
  // C(8, 1) = 0.5: g + 8 = 8, 2 t + 1 = 1, so lane 0, register c3.
  c[4 * 0 + 3] = 0.5;
  // D = A B + C has D(3, 6) = A(3, 5) B(5, 6) = 2 (g = 3, 2 t = 6: lane 15, register d0) and
  // D(8, 1) = 0.5 (lane 0, d3); every other element is 0.
  std::vector<double> expected(128, 0.0);
  expected[4 * 15 + 0] = 2.0;
  expected[4 * 0 + 3] = 0.5;
  CHECK(run_instruction(a, b, c) == expected);

  // cvt.rna: A(0, 0) = 1 + 2^-11 rounds (half way, away from zero) to 1 + 2^-10 and B(0, 0) =
  // 1 + 2^-10 + 2^-11 to 1 + 2^-9 (lane 0's a0 and b0), so D(0, 0) (lane 0's d0) is
  // (1 + 2^-10)(1 + 2^-9) = 1 + 3 2^-10 + 2^-19, exact in FP32.
  std::vector<double> a_round(128, 0.0), b_round(64, 0.0), zeros(128, 0.0);
  a_round[0] = 1.0 + std::ldexp(1.0, -11);
  b_round[0] = 1.0 + std::ldexp(1.0, -10) + std::ldexp(1.0, -11);
  std::vector<double> expected_round(128, 0.0);
  expected_round[0] = 1.0 + 3 * std::ldexp(1.0, -10) + std::ldexp(1.0, -19);
  CHECK(run_instruction(a_round, b_round, zeros) == expected_round);
}

TEST_CASE("mma.sync m16n8k8 tf32: every register of every lane in the documented layout",
          "[mma][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // Integers, every element of each matrix different (A from -64 to 63, B from -32 to 31), so a
  // register in the wrong place changes D; exact in TF32 (|x| <= 2^11) and in every FP32 sum.
  double matrix_a[16][8], matrix_b[8][8], matrix_c[16][8];
  for (int row = 0; row < 16; ++row) {
    for (int p = 0; p < 8; ++p) matrix_a[row][p] = row * 8 + p - 64;
  }
  for (int p = 0; p < 8; ++p) {
    for (int col = 0; col < 8; ++col) matrix_b[p][col] = p * 8 + col - 32;
  }
  for (int row = 0; row < 16; ++row) {
    for (int col = 0; col < 8; ++col) matrix_c[row][col] = 1000 * row + 10 * col;
  }
  std::vector<double> a(128), b(64), c(128), expected(128);
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const Element e = a_element(lane, i);
      a[4 * lane + i] = matrix_a[e.row][e.col];
      const Element f = cd_element(lane, i);
      c[4 * lane + i] = matrix_c[f.row][f.col];
      double sum = matrix_c[f.row][f.col];
      for (int p = 0; p < 8; ++p) sum += matrix_a[f.row][p] * matrix_b[p][f.col];
      expected[4 * lane + i] = sum;
    }
    for (int i = 0; i < 2; ++i) {
      const Element e = b_element(lane, i);
      b[2 * lane + i] = matrix_b[e.row][e.col];
    }
  }
  const std::vector<double> got = run_instruction(a, b, c);
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      INFO("lane " << lane << " d" << i << " = D(" << cd_element(lane, i).row << ", "
                   << cd_element(lane, i).col << ")");
      CHECK(got[4 * lane + i] == expected[4 * lane + i]);
    }
  }
}

TEST_CASE("mma.sync m16n8k16 bf16: one product placed by hand, and cvt.rn.bf16x2 rounding",
          "[mma][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  std::vector<double> a(256, 0.0), b(128, 0.0), c(128, 0.0);
  // A(3, 13) = 1: g = 3, 13 = 2t + 8 + 1 so t = 2: lane 14, register a2's high half (element 5).
  a[8 * 14 + 5] = 1.0;
  // B(13, 6) = 2: 13 = 2t + 8 + 1 so t = 2, g = 6: lane 26, register b1's high half (element 3).
  b[4 * 26 + 3] = 2.0;
  // C(9, 7) = 0.25: g + 8 = 9, 2t + 1 = 7: lane 7, register c3.
  c[4 * 7 + 3] = 0.25;
  // D(3, 6) = A(3, 13) B(13, 6) = 2 (lane 15, d0) and D(9, 7) = 0.25 (lane 7, d3); all else 0.
  std::vector<double> expected(128, 0.0);
  expected[4 * 15 + 0] = 2.0;
  expected[4 * 7 + 3] = 0.25;
  CHECK(run_bf16_instruction(a, b, c) == expected);

  // cvt.rn: A(0, 0) = 1 + 3 2^-8 is half way between 1 + 2^-7 and 1 + 2^-6 and goes to the even
  // one, 1 + 2^-6; B(0, 0) = 1 + 2^-7 + 2^-9 is nearest to 1 + 2^-7 (lane 0's low halves of a0
  // and b0). D(0, 0) = (1 + 2^-6)(1 + 2^-7) = 1 + 2^-6 + 2^-7 + 2^-13, exact in FP32. A(0, 1) =
  // 1 + 2^-8 (a0's high half, a tie that goes to the even 1) times B(1, 0) = 3 (b0's high half)
  // adds 3: D(0, 0) = 4 + 2^-6 + 2^-7 + 2^-13.
  std::vector<double> a_round(256, 0.0), b_round(128, 0.0), zeros(128, 0.0);
  a_round[0] = 1.0 + 3 * std::ldexp(1.0, -8);
  a_round[1] = 1.0 + std::ldexp(1.0, -8);
  b_round[0] = 1.0 + std::ldexp(1.0, -7) + std::ldexp(1.0, -9);
  b_round[1] = 3.0;
  std::vector<double> expected_round(128, 0.0);
  expected_round[0] = 4.0 + std::ldexp(1.0, -6) + std::ldexp(1.0, -7) + std::ldexp(1.0, -13);
  CHECK(run_bf16_instruction(a_round, b_round, zeros) == expected_round);
}

TEST_CASE("mma.sync m16n8k16 bf16: every register of every lane in the documented layout",
          "[mma][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // Integers, every element of each matrix different (A from -128 to 127, B from -64 to 63), so a
  // register or half-register in the wrong place changes D; exact in BF16 (|x| <= 2^8) and in
  // every FP32 sum (|D| < 2^18).
  double matrix_a[16][16], matrix_b[16][8], matrix_c[16][8];
  for (int row = 0; row < 16; ++row) {
    for (int p = 0; p < 16; ++p) matrix_a[row][p] = row * 16 + p - 128;
  }
  for (int p = 0; p < 16; ++p) {
    for (int col = 0; col < 8; ++col) matrix_b[p][col] = p * 8 + col - 64;
  }
  for (int row = 0; row < 16; ++row) {
    for (int col = 0; col < 8; ++col) matrix_c[row][col] = 100 * row + 10 * col;
  }
  std::vector<double> a(256), b(128), c(128), expected(128);
  for (int lane = 0; lane < 32; ++lane) {
    for (int e = 0; e < 8; ++e) {
      const Element at = bf16_a_element(lane, e);
      a[8 * lane + e] = matrix_a[at.row][at.col];
    }
    for (int e = 0; e < 4; ++e) {
      const Element at = bf16_b_element(lane, e);
      b[4 * lane + e] = matrix_b[at.row][at.col];
    }
    for (int i = 0; i < 4; ++i) {
      const Element f = cd_element(lane, i);
      c[4 * lane + i] = matrix_c[f.row][f.col];
      double sum = matrix_c[f.row][f.col];
      for (int p = 0; p < 16; ++p) sum += matrix_a[f.row][p] * matrix_b[p][f.col];
      expected[4 * lane + i] = sum;
    }
  }
  const std::vector<double> got = run_bf16_instruction(a, b, c);
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      INFO("lane " << lane << " d" << i << " = D(" << cd_element(lane, i).row << ", "
                   << cd_element(lane, i).col << ")");
      CHECK(got[4 * lane + i] == expected[4 * lane + i]);
    }
  }
}
