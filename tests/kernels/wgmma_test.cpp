// The one-instruction layout tests of wgmma.mma_async.m64nNk8.f32.tf32.tf32 and
// wgmma.mma_async.m64nNk16.f32.bf16.bf16 (sm_90a; kernels/common/wgmma.cuh): one warpgroup runs
// one instruction on A and B laid out in shared memory by the test, through descriptors with the
// byte offsets the test gives, and the test reads each thread's accumulator registers back
// (kernels::wgmma_m64nNk8_tf32_probe_cuda and wgmma_m64nNk16_bf16_probe_cuda, kernels with no
// layout of their own). On a GPU this checks the PTX ISA's descriptor format, shared-memory layout
// and accumulator layout, as written out below from the document, against the hardware before any
// kernel that relies on them is trusted (tools/gpu_check.sh runs it first, with the mma.sync
// one); on the CPU emulator it checks the emulator's instruction against the same document.
//   Descriptor ("Matrix Descriptor Format"): start address, LBO and SBO in bits 0-13, 16-29 and
//     32-45, each as (bytes & 0x3FFFF) >> 4; swizzle mode (bits 62-63) 0.
//   K-major, no swizzle ("Canonical Layouts", T = 4 TF32 or 8 BF16 per 16 bytes): core matrices
//     of 8 rows x 16 bytes, rows 16 bytes apart; LBO between core matrices adjacent along k, SBO
//     between those adjacent along M (A) or N (B). Element (row, k) of A, or (k, row) of B, at
//     byte (row / 8) SBO + (row % 8) 16 + (k / T) LBO + (k % T) (16 / T) from the start; a TF32
//     instruction reads k < 8 (two core matrices along k), a BF16 one k < 16 (also two).
//   Accumulators ("Matrix Fragments for wgmma.mma_async.m64nNk8"): thread t (warp w = t / 32, lane
//     l, g = l / 4, q = l % 4) holds d[i] = D(16 w + g + 8 ((i / 2) % 2), 8 (i / 4) + 2 q + i % 2).
//   TF32 operands: the low 13 bits of each 32-bit value are truncated. (The BF16 probe converts
//     its FP32 images to BF16 itself, ties to even, so its operands are BF16 values.)
// All values are small integers (exact in TF32 and BF16 and in every FP32 sum) except in the
// truncation case, so the results do not depend on the order in which a tensor core adds.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/tensor.h"
#include "kernels/matmul/matmul_wgmma.h"
#include "tests/support/cuda_guard.h"

using engine::Device;
using engine::DType;
using engine::Tensor;
namespace {

constexpr int kThreads = 128;

// The instruction under test: its k, its element size in shared memory, its probe's image size
// (elements) and the probe itself.
struct Input {
  const char* name;
  int k, element_bytes, image_elements;
  void (*probe)(int, const float*, const float*, uint32_t, uint32_t, uint32_t, uint32_t,
                const float*, bool, float*);
};
const Input kTf32{"m64nNk8 tf32", 8, 4, engine::kernels::kWgmmaProbeImageFloats,
                  engine::kernels::wgmma_m64nNk8_tf32_probe_cuda};
const Input kBf16{"m64nNk16 bf16", 16, 2, engine::kernels::kWgmmaBf16ProbeImageElements,
                  engine::kernels::wgmma_m64nNk16_bf16_probe_cuda};

// Where a test lays its operands out: A with the 8 core matrices along M next to each other
// (SBO 128 bytes) and the two along k 1024 bytes apart; B (N x K, k fastest) with the two along k
// 256 bytes apart. Different numbers for every offset, so any exchange of them shows.
struct Offsets {
  int a_leading = 1024, a_stride = 128, b_leading = 256, b_stride = 128;
};

// Image index of element (row, k) of a K-major no-swizzle operand, as the ISA documents it.
int k_major_index(const Input& in, int row, int k, int leading, int stride) {
  const int per_row = 16 / in.element_bytes;  // T: elements along k in a core matrix's row
  return ((row / 8) * stride + (row % 8) * 16 + (k / per_row) * leading +
          (k % per_row) * in.element_bytes) /
         in.element_bytes;
}

struct Element {
  int row, col;
};
Element d_element(int thread, int i) {
  const int warp = thread / 32, lane = thread % 32;
  return {16 * warp + lane / 4 + 8 * (i / 2 % 2), 8 * (i / 4) + 2 * (lane % 4) + i % 2};
}

// False, with the test marked skipped, where the instruction cannot run.
bool wgmma_available() {
  const char* reason = engine::kernels::wgmma_unsupported_reason();
  if (reason[0] == '\0') return true;
  WARN("skipped: no CUDA device with wgmma (" << reason << ")");
  return false;
}

// The images of A (64 x k) and B (k x n) at the given offsets, zeros elsewhere.
struct Images {
  std::vector<double> a, b;
};
Images zero_images(const Input& in) {
  return {std::vector<double>(size_t(in.image_elements), 0.0),
          std::vector<double>(size_t(in.image_elements), 0.0)};
}
Images lay_out(const Input& in, const std::vector<std::vector<double>>& matrix_a,
               const std::vector<std::vector<double>>& matrix_b, const Offsets& at) {
  Images images = zero_images(in);
  for (int row = 0; row < 64; ++row) {
    for (int k = 0; k < in.k; ++k) {
      images.a[size_t(k_major_index(in, row, k, at.a_leading, at.a_stride))] =
          matrix_a[size_t(row)][size_t(k)];
    }
  }
  for (int k = 0; k < in.k; ++k) {
    for (size_t col = 0; col < matrix_b[0].size(); ++col) {
      images.b[size_t(k_major_index(in, int(col), k, at.b_leading, at.b_stride))] =
          matrix_b[size_t(k)][col];
    }
  }
  return images;
}

// Runs the instruction (n = 8, 16 or 128) and returns every thread's d registers (n / 2 each).
std::vector<double> run_instruction(const Input& in, int n, const Images& images, const Offsets& at,
                                    const std::vector<double>& c_registers, bool scale_d) {
  const Device cuda = Device::cuda();
  const int64_t registers = int64_t(kThreads) * n / 2;
  const Tensor a = Tensor::from_vector(images.a, {in.image_elements}, DType::F32).to(cuda);
  const Tensor b = Tensor::from_vector(images.b, {in.image_elements}, DType::F32).to(cuda);
  const Tensor c = Tensor::from_vector(c_registers, {registers}, DType::F32).to(cuda);
  Tensor d = Tensor::zeros({registers}, DType::F32, cuda);
  in.probe(n, a.data<float>(), b.data<float>(), uint32_t(at.a_leading), uint32_t(at.a_stride),
           uint32_t(at.b_leading), uint32_t(at.b_stride), c.data<float>(), scale_d,
           d.data<float>());
  return d.to_vector();
}

// D = A B (+ C) read from the images at `reading` offsets, in the register layout.
std::vector<double> expected_registers(const Input& in, int n, const Images& images,
                                       const Offsets& reading,
                                       const std::vector<std::vector<double>>& matrix_c,
                                       bool scale_d) {
  std::vector<double> expected(size_t(kThreads * n / 2));
  for (int thread = 0; thread < kThreads; ++thread) {
    for (int i = 0; i < n / 2; ++i) {
      const Element e = d_element(thread, i);
      double sum = scale_d ? matrix_c[size_t(e.row)][size_t(e.col)] : 0.0;
      for (int k = 0; k < in.k; ++k) {
        sum += images.a[size_t(k_major_index(in, e.row, k, reading.a_leading, reading.a_stride))] *
               images.b[size_t(k_major_index(in, e.col, k, reading.b_leading, reading.b_stride))];
      }
      expected[size_t(thread * (n / 2) + i)] = sum;
    }
  }
  return expected;
}

// Small integers, exact in TF32 and BF16 (at most 8 significant bits) and every sum below 2^24, so
// exact in FP32: A(row, k) = (k_size row + k) mod 251 - 125, B(k, col) = (n k + col) mod 241 -
// 120 (distinct within any 241 consecutive elements, so an exchanged element shows), C(row, col) =
// 1000 row + col.
struct Matrices {
  std::vector<std::vector<double>> a, b, c;
};
Matrices small_integers(const Input& in, int n) {
  Matrices m{std::vector<std::vector<double>>(64, std::vector<double>(size_t(in.k))),
             std::vector<std::vector<double>>(size_t(in.k), std::vector<double>(size_t(n))),
             std::vector<std::vector<double>>(64, std::vector<double>(size_t(n)))};
  for (int row = 0; row < 64; ++row) {
    for (int k = 0; k < in.k; ++k) m.a[size_t(row)][size_t(k)] = (in.k * row + k) % 251 - 125;
    for (int col = 0; col < n; ++col) m.c[size_t(row)][size_t(col)] = 1000 * row + col;
  }
  for (int k = 0; k < in.k; ++k) {
    for (int col = 0; col < n; ++col) m.b[size_t(k)][size_t(col)] = (n * k + col) % 241 - 120;
  }
  return m;
}

std::vector<double> c_registers_of(int n, const std::vector<std::vector<double>>& matrix_c) {
  std::vector<double> registers(size_t(kThreads * n / 2));
  for (int thread = 0; thread < kThreads; ++thread) {
    for (int i = 0; i < n / 2; ++i) {
      const Element e = d_element(thread, i);
      registers[size_t(thread * (n / 2) + i)] = matrix_c[size_t(e.row)][size_t(e.col)];
    }
  }
  return registers;
}

void check_registers(int n, const std::vector<double>& got, const std::vector<double>& expected) {
  REQUIRE(got.size() == expected.size());
  int wrong = 0;
  for (int thread = 0; thread < kThreads; ++thread) {
    for (int i = 0; i < n / 2; ++i) {
      const size_t at = size_t(thread * (n / 2) + i);
      if (got[at] == expected[at] || ++wrong > 8) continue;  // the first few, not 8192 lines
      INFO("thread " << thread << " d" << i << " = D(" << d_element(thread, i).row << ", "
                     << d_element(thread, i).col << ")");
      CHECK(got[at] == expected[at]);
    }
  }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("wgmma m64nNk8 tf32: one product placed by hand", "[wgmma][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  if (!wgmma_available()) return;
  const Offsets at;  // A: LBO 1024, SBO 128; B: LBO 256, SBO 128
  Images images = zero_images(kTf32);
  // A(19, 5) = 1: row 19 is core matrix 2 (SBO 128) row 3 (48 bytes), k 5 is core matrix 1 (LBO
  // 1024) column 1 (4 bytes): byte 256 + 48 + 1024 + 4 = 1332, float 333.
  images.a[333] = 1.0;
  // B(5, 10) = 2: column 10 is core matrix 1 (SBO 128) row 2 (32), k 5 core matrix 1 (LBO 256)
  // column 1 (4): byte 420, float 105.
  images.b[105] = 2.0;
  // C(40, 3) = 0.5: 40 = 16 w + g + 8 h with w = 2, g = 0, h = 1; 3 = 8 j + 2 q + e with j = 0,
  // q = 1, e = 1: thread 32 w + 4 g + q = 65, register 4 j + 2 h + e = 3.
  std::vector<double> c(kThreads * 8, 0.0);
  c[8 * 65 + 3] = 0.5;
  // D = A B + C: D(19, 10) = 2 (19 = 16 + 3 + 0: w 1, g 3, h 0; 10 = 8 + 2 + 0: j 1, q 1, e 0:
  // thread 45, register 4) and D(40, 3) = 0.5; every other element 0.
  std::vector<double> expected(kThreads * 8, 0.0);
  expected[8 * 45 + 4] = 2.0;
  expected[8 * 65 + 3] = 0.5;
  CHECK(run_instruction(kTf32, 16, images, at, c, true) == expected);
  // scale-d = 0: D = A B, C ignored.
  expected[8 * 65 + 3] = 0.0;
  CHECK(run_instruction(kTf32, 16, images, at, c, false) == expected);
}

TEST_CASE("wgmma m64nNk16 bf16: one product placed by hand", "[wgmma][cuda][bf16]") {
  REQUIRE_CUDA_OR_SKIP();
  if (!wgmma_available()) return;
  const Offsets at;  // A: LBO 1024, SBO 128; B: LBO 256, SBO 128
  Images images = zero_images(kBf16);
  // A(19, 13) = 1: row 19 is core matrix 2 (SBO 128) row 3 (48 bytes), k 13 is core matrix 1
  // (LBO 1024) column 5 (2 bytes each: 10): byte 256 + 48 + 1024 + 10 = 1338, element 669.
  images.a[669] = 1.0;
  // B(13, 10) = 2: column 10 is core matrix 1 (SBO 128) row 2 (32), k 13 core matrix 1 (LBO 256)
  // column 5 (10): byte 426, element 213.
  images.b[213] = 2.0;
  // C and D in the same registers as the TF32 case: D(19, 10) = 2 is thread 45's register 4,
  // C(40, 3) = 0.5 thread 65's register 3.
  std::vector<double> c(kThreads * 8, 0.0);
  c[8 * 65 + 3] = 0.5;
  std::vector<double> expected(kThreads * 8, 0.0);
  expected[8 * 45 + 4] = 2.0;
  expected[8 * 65 + 3] = 0.5;
  CHECK(run_instruction(kBf16, 16, images, at, c, true) == expected);
  expected[8 * 65 + 3] = 0.0;
  CHECK(run_instruction(kBf16, 16, images, at, c, false) == expected);
}

TEST_CASE("wgmma tf32 and bf16: every register of every thread in the documented layout",
          "[wgmma][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  if (!wgmma_available()) return;
  const Offsets at;
  for (const Input& in : {kTf32, kBf16}) {
    for (int n : {8, 16, 128}) {
      INFO(in.name << " n=" << n);
      const Matrices m = small_integers(in, n);
      const Images images = lay_out(in, m.a, m.b, at);
      const std::vector<double> c = c_registers_of(n, m.c);
      check_registers(n, run_instruction(in, n, images, at, c, true),
                      expected_registers(in, n, images, at, m.c, true));
      check_registers(n, run_instruction(in, n, images, at, c, false),
                      expected_registers(in, n, images, at, m.c, false));
    }
  }
}

TEST_CASE("wgmma tf32 and bf16: a descriptor with LBO and SBO exchanged reads another matrix",
          "[wgmma][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  if (!wgmma_available()) return;
  const int n = 16;
  const Offsets at;
  for (const Input& in : {kTf32, kBf16}) {
    const Matrices m = small_integers(in, n);
    const Images images = lay_out(in, m.a, m.b, at);
    const std::vector<double> c = c_registers_of(n, m.c);
    const std::vector<double> right = expected_registers(in, n, images, at, m.c, true);
    // The same images through descriptors with A's, then B's, offsets exchanged: the instruction
    // reads the elements the documented formula gives for those offsets (zeros where that falls
    // outside the matrix), which is not the product of A and B.
    Offsets a_exchanged = at, b_exchanged = at;
    std::swap(a_exchanged.a_leading, a_exchanged.a_stride);
    std::swap(b_exchanged.b_leading, b_exchanged.b_stride);
    for (const Offsets& wrong : {a_exchanged, b_exchanged}) {
      INFO(in.name << ": A LBO " << wrong.a_leading << " SBO " << wrong.a_stride << ", B LBO "
                   << wrong.b_leading << " SBO " << wrong.b_stride);
      const std::vector<double> misread = expected_registers(in, n, images, wrong, m.c, true);
      CHECK(misread != right);
      check_registers(n, run_instruction(in, n, images, wrong, c, true), misread);
    }
  }
}

TEST_CASE("wgmma m64nNk8 tf32: operands are truncated to tf32, not rounded", "[wgmma][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  if (!wgmma_available()) return;
  const Offsets at;
  Images images = zero_images(kTf32);
  // A(0, 0) = 1 + 2^-11 + 2^-12 (float 0 of the image): TF32 keeps 10 fraction bits, so truncation
  // gives 1 where cvt.rna would give 1 + 2^-10. B(0, 0) = 3 (float 0). D(0, 0) (thread 0, d0) = 3.
  images.a[0] = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -12);
  images.b[0] = 3.0;
  std::vector<double> expected(kThreads * 4, 0.0);
  expected[0] = 3.0;
  CHECK(run_instruction(kTf32, 8, images, at, std::vector<double>(kThreads * 4, 0.0), false) ==
        expected);
}
