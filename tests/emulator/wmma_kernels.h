// Host entry points of tests/emulator/wmma_kernels.cu; each launches one block and returns
// cudaGetLastError(). Pointers are device memory; matrices are dense (ld = their row length in
// the stated layout).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace sample {

// d (16 x 16, row-major) = a b + c by one TF32 m16n16k8 mma_sync of a block of `threads` (32: one
// warp). a is 16 x 8, b 8 x 16, each row- or column-major; c is 16 x 16 row-major, or its
// transpose when c_col_major. With `convert`, every operand element goes through
// wmma::__float_to_tf32 first, as CUDA requires.
cudaError_t wmma_tf32(const float* a, bool a_col_major, const float* b, bool b_col_major,
                      const float* c, bool c_col_major, float* d, bool convert, unsigned threads);
// d (16 x 16, row-major) = a b + c by one BF16 m16n16k16 mma_sync; a, b, c row-major.
cudaError_t wmma_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, const float* c, float* d);
// The planted layout bug: d = a b (a 16 x 8, b 8 x 16, row-major) written from the accumulator's
// elements through an assumed lane layout instead of store_matrix_sync.
cudaError_t wmma_assumed_layout(const float* a, const float* b, float* d);
// Loads a 16 x 8 matrix_a fragment from a + offset (ldm 8); d[lane] = its element 0.
cudaError_t wmma_load(const float* a, int offset, float* d);

}  // namespace sample
