// The CUDA emulator's stand-in for <mma.h>: WMMA (nvcuda::wmma), the warp-level matrix
// multiply-accumulate of CUDA C++, for the two shapes our kernels use:
//
//   TF32  m16n16k8:  fragment<matrix_a, 16, 16, 8, precision::tf32, L>  (A: 16 x 8, float storage)
//                    fragment<matrix_b, 16, 16, 8, precision::tf32, L>  (B: 8 x 16)
//   BF16  m16n16k16: fragment<matrix_a, 16, 16, 16, __nv_bfloat16, L>  (A: 16 x 16)
//                    fragment<matrix_b, 16, 16, 16, __nv_bfloat16, L>  (B: 16 x 16)
//   both:            fragment<accumulator, 16, 16, K, float>           (C, D: 16 x 16, FP32)
//
// with load_matrix_sync, store_matrix_sync, fill_fragment, mma_sync and __float_to_tf32.
//
// Layout: CUDA documents WMMA fragments as opaque ("the mapping of matrix elements into fragment
// elements is unspecified"), so only whole-fragment operations (load, store, fill, mma, and the
// same elementwise operation on every element) are portable. This emulator therefore gives each
// fragment type a DELIBERATELY SCRAMBLED element-to-lane map (fragment_position below), unlike any
// GPU's: a kernel that indexes x[i] as if it knew which matrix element it holds (a bias added to
// "column i % 16", an epilogue that writes x[i] itself) computes garbage here and is caught.
//
// Numbers: __float_to_tf32 is cvt.rna.tf32.f32 (round to nearest, ties away from zero, to 10
// mantissa bits; the result is a float whose low 13 bits are zero). mma_sync computes
// D[r][c] = C[r][c] + sum over p ascending of A[r][p] B[p][c] in FP32, one rounding per add (a
// product of two TF32 or two BF16 values is exact in FP32, so only the sums round; the hardware's
// summation order inside one instruction is unspecified, so a GPU's last bits may differ).
// TF32 operands must have been converted with __float_to_tf32, as CUDA requires: an operand with
// any of its low 13 bits set is a launch failure here (on a GPU the result would be unspecified).
//
// Checks a GPU would also make (as a launch failure): the pointer of a load or store must be
// 256-bit (32-byte) aligned and ldm a multiple of 16 bytes; mma_sync is warp-collective and needs
// all 32 lanes of the warp. mma_sync is a warp barrier that orders the lanes' fragment reads (the
// emulator reads the other lanes' fragments), like the shuffles in cuda_runtime.h.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace nvcuda::wmma {

struct row_major;
struct col_major;
struct matrix_a;
struct matrix_b;
struct accumulator;
namespace precision {
struct tf32;
}
enum layout_t { mem_row_major, mem_col_major };

inline float __float_to_tf32(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7f800000u) != 0x7f800000u) {  // finite: add half an ulp to the magnitude, cut
    bits = (bits + 0x1000u) & ~0x1fffu;       // (ties away from zero; may carry up to infinity)
  } else if ((bits & 0x7fffffu) != 0) {
    bits = 0x7fffffffu;  // NaN: the canonical NaN
  }
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}

namespace emulated {

template <typename T>
struct Storage {
  using type = T;
};
template <>
struct Storage<precision::tf32> {
  using type = float;
};

// The matrix a fragment holds: A is M x K, B is K x N, C and D are M x N.
template <typename Use, int M, int N, int K>
struct Shape {
  static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
  static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
};

// The scramble: a fragment type's elements (lane, i) are numbered slot = 32 i + lane and slot s
// holds matrix element (s * multiplier + offset) mod count in row-major order. The multiplier is
// odd and count a power of two, so every matrix element has exactly one place; the constants
// differ by operand and memory layout so no two fragment types share a map.
template <typename Use, typename Layout>
struct Scramble {
  static constexpr int multiplier = 149, offset = 71;  // accumulator
};
template <>
struct Scramble<matrix_a, row_major> {
  static constexpr int multiplier = 37, offset = 5;
};
template <>
struct Scramble<matrix_a, col_major> {
  static constexpr int multiplier = 45, offset = 17;
};
template <>
struct Scramble<matrix_b, row_major> {
  static constexpr int multiplier = 83, offset = 29;
};
template <>
struct Scramble<matrix_b, col_major> {
  static constexpr int multiplier = 101, offset = 3;
};

inline float to_float(__nv_bfloat16 value) { return __bfloat162float(value); }
inline float to_float(float value) { return value; }

// A launch failure with a reason, as a GPU's illegal or misaligned access would be.
[[noreturn]] inline void fail(const char* why) { emu::fault(why); }

// `operation` (load_matrix_sync, store_matrix_sync) needs a 256-bit aligned pointer and an ldm of
// whole 16 bytes, at least as long as the fragment's rows (or columns, column-major).
template <typename T>
void check_access(const T* pointer, unsigned ldm, int min_ldm, const char* operation) {
  if (reinterpret_cast<uintptr_t>(pointer) % 32 != 0 || ldm * sizeof(T) % 16 != 0 ||
      static_cast<int>(ldm) < min_ldm) {
    fail((std::string("wmma::") + operation +
          ": pointer not 32-byte aligned or ldm not a multiple of 16 bytes (or shorter than "
          "the fragment)")
             .c_str());
  }
}

}  // namespace emulated

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
class fragment {
  static_assert(M == 16 && N == 16 &&
                    ((K == 8 && (std::is_same<T, precision::tf32>::value ||
                                 std::is_same<Use, accumulator>::value)) ||
                     (K == 16 && (std::is_same<T, __nv_bfloat16>::value ||
                                  std::is_same<Use, accumulator>::value))),
                "the emulator has WMMA m16n16k8 (TF32) and m16n16k16 (BF16) only");
  static_assert(!std::is_same<Use, accumulator>::value || std::is_same<T, float>::value,
                "the emulator's WMMA accumulates in float only");

 public:
  using element_type = T;
  using storage_element_type = typename emulated::Storage<T>::type;
  static constexpr int rows = emulated::Shape<Use, M, N, K>::rows;
  static constexpr int cols = emulated::Shape<Use, M, N, K>::cols;
  enum { num_elements = rows * cols / warpSize, num_storage_elements = num_elements };
  storage_element_type x[num_elements];

  // Where element i of `lane` sits in the fragment's matrix (row-major index row * cols + col).
  static int position(int lane, int i) {
    using S = emulated::Scramble<Use, Layout>;
    return ((i * warpSize + lane) * S::multiplier + S::offset) % (rows * cols);
  }
  // Where that element is in memory with leading dimension ldm, row- or column-major.
  static std::size_t memory_offset(int lane, int i, unsigned ldm, bool row_major_memory) {
    const int at = position(lane, i), r = at / cols, c = at % cols;
    return row_major_memory ? std::size_t(r) * ldm + c : std::size_t(c) * ldm + r;
  }
};

template <typename Use, int M, int N, int K, typename T, typename Layout, typename Value>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, const Value& value) {
  for (auto& element : f.x) element = value;
}

// matrix_a / matrix_b: the memory layout is the fragment's.
template <typename Use, int M, int N, int K, typename T, typename Layout, typename Stored>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const Stored* p, unsigned ldm) {
  using F = fragment<Use, M, N, K, T, Layout>;
  static_assert(!std::is_same<Use, accumulator>::value,
                "load_matrix_sync of an accumulator takes a layout_t");
  static_assert(std::is_same<Stored, typename F::storage_element_type>::value,
                "load_matrix_sync: pointer type does not match the fragment");
  constexpr bool row = std::is_same<Layout, row_major>::value;
  emulated::check_access(p, ldm, row ? F::cols : F::rows, "load_matrix_sync");
  const int lane = emu::lane_id();
  for (int i = 0; i < F::num_elements; ++i) f.x[i] = p[F::memory_offset(lane, i, ldm, row)];
}

// The accumulator: the memory layout is an argument.
template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* p, unsigned ldm,
                      layout_t layout) {
  using F = fragment<accumulator, M, N, K, float>;
  const bool row = layout == mem_row_major;
  emulated::check_access(p, ldm, row ? N : M, "load_matrix_sync");
  const int lane = emu::lane_id();
  for (int i = 0; i < F::num_elements; ++i) f.x[i] = p[F::memory_offset(lane, i, ldm, row)];
}

template <int M, int N, int K>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ldm,
                       layout_t layout) {
  using F = fragment<accumulator, M, N, K, float>;
  const bool row = layout == mem_row_major;
  emulated::check_access(p, ldm, row ? N : M, "store_matrix_sync");
  const int lane = emu::lane_id();
  for (int i = 0; i < F::num_elements; ++i) p[F::memory_offset(lane, i, ldm, row)] = f.x[i];
}

// D = A B + C over the whole warp: each lane reads every lane's A and B fragments (between two
// warp barriers) and computes its own D elements.
template <int M, int N, int K, typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, M, N, K, float>& d,
              const fragment<matrix_a, M, N, K, T, LayoutA>& a,
              const fragment<matrix_b, M, N, K, T, LayoutB>& b,
              const fragment<accumulator, M, N, K, float>& c) {
  using FA = fragment<matrix_a, M, N, K, T, LayoutA>;
  using FB = fragment<matrix_b, M, N, K, T, LayoutB>;
  using FC = fragment<accumulator, M, N, K, float>;
  struct Operands {
    const FA* a;
    const FB* b;
  } mine{&a, &b};
  uint64_t lanes[warpSize];
  emu::warp_collective_begin(reinterpret_cast<uint64_t>(&mine), lanes);
  float matrix_a_values[M][K], matrix_b_values[K][N];
  for (int lane = 0; lane < warpSize; ++lane) {
    if (lanes[lane] == emu::kAbsentLane) {
      emulated::fail("wmma::mma_sync: not every lane of the warp called it");
    }
    const Operands* theirs = reinterpret_cast<const Operands*>(lanes[lane]);
    for (int i = 0; i < FA::num_elements; ++i) {
      const int at = FA::position(lane, i);
      matrix_a_values[at / K][at % K] = emulated::to_float(theirs->a->x[i]);
    }
    for (int i = 0; i < FB::num_elements; ++i) {
      const int at = FB::position(lane, i);
      matrix_b_values[at / N][at % N] = emulated::to_float(theirs->b->x[i]);
    }
  }
  if (std::is_same<T, precision::tf32>::value) {
    for (int p = 0; p < K; ++p) {
      for (int i = 0; i < M; ++i) {
        if (__float_as_uint(matrix_a_values[i][p]) & 0x1fffu) {
          emulated::fail("wmma::mma_sync: a matrix_a element is not TF32 (__float_to_tf32)");
        }
      }
      for (int j = 0; j < N; ++j) {
        if (__float_as_uint(matrix_b_values[p][j]) & 0x1fffu) {
          emulated::fail("wmma::mma_sync: a matrix_b element is not TF32 (__float_to_tf32)");
        }
      }
    }
  }
  const int self = emu::lane_id();
  float result[FC::num_elements];
  for (int i = 0; i < FC::num_elements; ++i) {
    const int at = FC::position(self, i), r = at / N, col = at % N;
    float sum = c.x[i];
    for (int p = 0; p < K; ++p) sum += matrix_a_values[r][p] * matrix_b_values[p][col];
    result[i] = sum;
  }
  emu::warp_collective_end();
  for (int i = 0; i < FC::num_elements; ++i) d.x[i] = result[i];
}

}  // namespace nvcuda::wmma
