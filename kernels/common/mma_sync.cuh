// Tensor-core and asynchronous-copy instructions for our own kernels (sm_80 and later), as plain
// device functions: on nvcc each is one PTX instruction in inline assembly; in the CUDA emulator's
// build (tests/support/cuda_emulator, a host compiler, no __CUDACC__) each calls the emulator's C++
// for the same instruction (its <mma_ptx.h>: the documented fragment layouts, TF32 operand
// checks, and copies that land only at the wait).
//
//   float_to_tf32(x)                cvt.rna.tf32.f32: x rounded to TF32 (10 mantissa bits, round to
//                                   nearest, ties away from zero) as a .b32 register
//   mma_m16n8k8_tf32(d, a, b, c)    mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: D = A B + C
//                                   for one warp, A 16 x 8, B 8 x 8, C and D 16 x 8 in FP32
//   pack_bf16x2(low, high)          cvt.rn.bf16x2.f32: two floats rounded to BF16 (to nearest, ties
//                                   to even) in one .b32 register, `low` in bits 0-15
//   mma_m16n8k16_bf16(d, a, b, c)   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32:
//                                   D = A B + C for one warp, A 16 x 16, B 16 x 8 in BF16, C and
//                                   D as above
//   cp_async_16(dst, src, n)        cp.async.cg.shared.global, 16 bytes (n of them read, the
//                                   rest 0)
//   cp_async_4(dst, src, n)         cp.async.ca.shared.global, 4 bytes (n = 4 or 0)
//   cp_async_commit()               cp.async.commit_group: closes the group of copies issued so far
//   cp_async_wait<N>()              cp.async.wait_group N: every group but the newest N is complete
//                                   (for this thread; a __syncthreads after it shows the data to
//                                   the block)
//
// The fragment layout (PTX ISA, "Matrix Fragments for mma.m16n8k8", .tf32), for lane l of the warp
// with g = l >> 2 (groupID) and t = l % 4 (threadID_in_group):
//   a[0] = A(g, t)     a[1] = A(g + 8, t)     a[2] = A(g, t + 4)     a[3] = A(g + 8, t + 4)
//   b[0] = B(t, g)     b[1] = B(t + 4, g)
//   c[0], d[0] = (g, 2t)       c[1], d[1] = (g, 2t + 1)
//   c[2], d[2] = (g + 8, 2t)   c[3], d[3] = (g + 8, 2t + 1)
// and for m16n8k16 BF16 ("Matrix Fragments for mma.m16n8k16 with floating point type"), each .b32
// register two elements adjacent along k, the lower k in the low half:
//   a[0] = A(g, 2t | 2t + 1)      a[1] = A(g + 8, 2t | 2t + 1)
//   a[2] = A(g, 2t + 8 | 2t + 9)  a[3] = A(g + 8, 2t + 8 | 2t + 9)
//   b[0] = B(2t | 2t + 1, g)      b[1] = B(2t + 8 | 2t + 9, g)       c, d as for m16n8k8
// ("row.col": A is read along its rows, B along its columns; in registers that is the layout
// above, whatever layout the matrices had in memory.) The layout test, tests/kernels/
// mma_sync_test.cpp, checks both on one instruction, on the emulator and on a GPU.
//
// Alignment: cp_async_16 needs both addresses 16-byte aligned, cp_async_4 4-byte aligned. A source
// read with n = 0 is not dereferenced, but it should still be a valid address (we pass the
// operand's base).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#if !defined(__CUDACC__)
#include <mma_ptx.h>  // the CUDA emulator's instructions (tests/support/cuda_emulator/include)
#endif

namespace engine::kernels {

__device__ __forceinline__ uint32_t float_to_tf32(float x) {
#if defined(__CUDACC__)
  uint32_t bits;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(bits) : "f"(x));
  return bits;
#else
  return emu::ptx::float_to_tf32(x);
#endif
}

__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4],
                                                 const uint32_t (&b)[2], const float (&c)[4]) {
#if defined(__CUDACC__)
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#else
  emu::ptx::mma_m16n8k8_tf32(d, a, b, c);
#endif
}

__device__ __forceinline__ uint32_t pack_bf16x2(float low, float high) {
#if defined(__CUDACC__)
  uint32_t bits;  // cvt's first source goes to the upper half
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(bits) : "f"(high), "f"(low));
  return bits;
#else
  return emu::ptx::pack_bf16x2(low, high);
#endif
}

__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4],
                                                  const uint32_t (&b)[2], const float (&c)[4]) {
#if defined(__CUDACC__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#else
  emu::ptx::mma_m16n8k16_bf16(d, a, b, c);
#endif
}

__device__ __forceinline__ void cp_async_16(void* shared_destination, const void* global_source,
                                            int source_bytes) {
#if defined(__CUDACC__)
  const unsigned shared_address =
      static_cast<unsigned>(__cvta_generic_to_shared(shared_destination));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address),
               "l"(global_source), "r"(source_bytes)
               : "memory");
#else
  emu::ptx::cp_async(shared_destination, global_source, 16, static_cast<std::size_t>(source_bytes));
#endif
}

__device__ __forceinline__ void cp_async_4(void* shared_destination, const void* global_source,
                                           int source_bytes) {
#if defined(__CUDACC__)
  const unsigned shared_address =
      static_cast<unsigned>(__cvta_generic_to_shared(shared_destination));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address),
               "l"(global_source), "r"(source_bytes)
               : "memory");
#else
  emu::ptx::cp_async(shared_destination, global_source, 4, static_cast<std::size_t>(source_bytes));
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDACC__)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
  emu::ptx::cp_async_commit();
#endif
}

// kPending: how many of the newest committed groups may still be in flight (an immediate in PTX).
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDACC__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#else
  emu::ptx::cp_async_wait(kPending);
#endif
}

}  // namespace engine::kernels
