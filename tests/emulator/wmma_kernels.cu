// WMMA kernels that exercise the emulator's <mma.h> (tests/emulator/wmma_test.cpp): one warp, one
// matrix instruction each, plus the mistakes the emulator must catch (a layout assumed, an operand
// not converted to TF32, a misaligned pointer, a partial warp). Built through cuda_translate only.
#include <cuda_runtime.h>
#include <mma.h>

#include <type_traits>

#include "tests/emulator/wmma_kernels.h"

namespace sample {
namespace {

namespace wmma = nvcuda::wmma;

using TfAccumulator = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

// D = A B + C, A 16 x 8 and B 8 x 16 in the given layouts (ld = the other dimension), C and D
// 16 x 16 row-major (C read as column-major when c_col_major: then it is C^T in memory).
template <typename LayoutA, typename LayoutB>
__global__ void wmma_tf32_kernel(const float* a, const float* b, const float* c, bool c_col_major,
                                 float* d, bool convert) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, LayoutA> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, LayoutB> fb;
  TfAccumulator acc;
  constexpr bool a_row = std::is_same<LayoutA, wmma::row_major>::value;
  constexpr bool b_row = std::is_same<LayoutB, wmma::row_major>::value;
  wmma::load_matrix_sync(fa, a, a_row ? 8 : 16);
  wmma::load_matrix_sync(fb, b, b_row ? 16 : 8);
  wmma::load_matrix_sync(acc, c, 16, c_col_major ? wmma::mem_col_major : wmma::mem_row_major);
  if (convert) {
    for (int i = 0; i < fa.num_elements; ++i) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
    for (int i = 0; i < fb.num_elements; ++i) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
  }
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

__global__ void wmma_bf16_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, const float* c,
                                 float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::load_matrix_sync(acc, c, 16, wmma::mem_row_major);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

// The planted bug: D written straight from the accumulator's elements by a layout a GPU might use
// (lane / 4 picks the row within each 8-row half, the lane's quad position two adjacent columns),
// which WMMA does not promise; the correct epilogue is store_matrix_sync.
__global__ void wmma_assumed_layout_kernel(const float* a, const float* b, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb;
  TfAccumulator acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, a, 8);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  const int lane = threadIdx.x % 32;
  for (int i = 0; i < acc.num_elements; ++i) {
    const int row = lane / 4 + 8 * (i / 2 % 2), col = lane % 4 * 2 + i % 2 + 8 * (i / 4);
    d[row * 16 + col] = acc.x[i];
  }
}

__global__ void wmma_load_kernel(const float* a, int offset, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a + offset, 8);
  d[threadIdx.x] = fa.x[0];
}

}  // namespace

cudaError_t wmma_tf32(const float* a, bool a_col_major, const float* b, bool b_col_major,
                      const float* c, bool c_col_major, float* d, bool convert, unsigned threads) {
  if (!a_col_major && !b_col_major) {
    wmma_tf32_kernel<wmma::row_major, wmma::row_major>
        <<<1, threads>>>(a, b, c, c_col_major, d, convert);
  } else if (!a_col_major) {
    wmma_tf32_kernel<wmma::row_major, wmma::col_major>
        <<<1, threads>>>(a, b, c, c_col_major, d, convert);
  } else if (!b_col_major) {
    wmma_tf32_kernel<wmma::col_major, wmma::row_major>
        <<<1, threads>>>(a, b, c, c_col_major, d, convert);
  } else {
    wmma_tf32_kernel<wmma::col_major, wmma::col_major>
        <<<1, threads>>>(a, b, c, c_col_major, d, convert);
  }
  return cudaGetLastError();
}

cudaError_t wmma_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, const float* c, float* d) {
  wmma_bf16_kernel<<<1, 32>>>(a, b, c, d);
  return cudaGetLastError();
}

cudaError_t wmma_assumed_layout(const float* a, const float* b, float* d) {
  wmma_assumed_layout_kernel<<<1, 32>>>(a, b, d);
  return cudaGetLastError();
}

cudaError_t wmma_load(const float* a, int offset, float* d) {
  wmma_load_kernel<<<1, 32>>>(a, offset, d);
  return cudaGetLastError();
}

}  // namespace sample
