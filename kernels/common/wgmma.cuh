// Warpgroup matrix multiply-accumulate (wgmma, sm_90a only) for our own kernels, as plain device
// functions in the style of mma_sync.cuh: on nvcc each is one PTX instruction in inline assembly,
// compiled only where __CUDA_ARCH_FEAT_SM90_ALL says the target is sm_90a (elsewhere -- sm_80, or
// sm_90 without the "a" -- the body is __trap(): the host refuses such a device before launching,
// see matmul_wgmma_cuda.cu); in the CUDA emulator's build each calls the emulator's C++ for the
// same instruction (its <wgmma_ptx.h>: the documented layouts, truncation of TF32 operands, BF16
// operands, and accumulators that land only at the wait).
//
//   shared_address(p)                   __cvta_generic_to_shared: p's address in the shared window
//   k_major_descriptor(p, lbo, sbo)     a matrix descriptor, no swizzle: start address p (16-byte
//                                       aligned), leading / stride dimension byte offsets
//   fence_proxy_async_shared()          fence.proxy.async.shared::cta: this thread's writes to
//                                       shared memory by ordinary stores (or cp.async) become
//                                       visible to the async proxy that wgmma reads through; then
//                                       a barrier, for the other threads' wgmma
//   wgmma_fence()                       wgmma.fence.sync.aligned: before the first wgmma.mma_async
//                                       of a batch (orders the accumulator registers' earlier
//                                       accesses before it)
//   wgmma_m64n{8,16,128}k8_tf32(d, a_desc, b_desc, scale_d)
//                                       wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32:
//                                       D = A B + D (scale_d) or A B, A 64 x 8 and B 8 x N from
//                                       shared memory, D in N / 2 FP32 registers per thread; all
//                                       128 threads of the warpgroup, same operands
//   wgmma_m64n{8,16,128}k16_bf16(d, a_desc, b_desc, scale_d)
//                                       wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16:
//                                       the same with BF16 operands, A 64 x 16 and B 16 x N,
//                                       both K-major (no transpose)
//   wgmma_commit_group()                wgmma.commit_group.sync.aligned
//   wgmma_wait_group<N>()               wgmma.wait_group.sync.aligned N: all but the newest N
//                                       groups complete; only then may d be read (or shared memory
//                                       they read be overwritten)
//   wgmma_fence_operands(d)             no instruction: pins the accumulators' accesses in place
//                                       around the asynchronous instructions (compiler only)
//
// The facts of the PTX ISA these rely on (section "Asynchronous Warpgroup Level Matrix
// Multiply-Accumulate Instructions"; the layout test tests/kernels/wgmma_test.cpp checks them on
// one instruction, on the emulator and on a GPU, before any kernel built on them):
// - Descriptor ("Matrix Descriptor Format"): bits 0-13 start address, 16-29 leading dimension byte
//   offset, 32-45 stride dimension byte offset, each encoded as (x & 0x3FFFF) >> 4; bits 49-51
//   base offset (0: unused without swizzle); bits 62-63 swizzle mode, 0 = none.
// - TF32 operands are K-major (no transpose for .tf32). K-major without swizzle ("Canonical
//   Layouts", ((8,m),(T,2k)):((1T,SBO),(1,LBO)), T = 4): core matrices of 8 rows x 16 bytes (4
//   TF32 along k), 128 contiguous bytes each; LBO = bytes between core matrices adjacent along k,
//   SBO = between core matrices adjacent along M (A) or N (B). In bytes from the start address:
//     A(row, k)  (row / 8) SBO + (row % 8) 16 + (k / 4) LBO + (k % 4) 4
//     B(k, col)  (col / 8) SBO + (col % 8) 16 + (k / 4) LBO + (k % 4) 4
//   (B is stored as its transpose, N x K with k fastest: "column-major" in the ISA's words.)
// - BF16 operands, K-major without swizzle (T = 8): the same 8-row x 16-byte core matrices, 8 BF16
//   along k, so element (row, k) of A sits at (row / 8) SBO + (row % 8) 16 + (k / 8) LBO +
//   (k % 8) 2 (B's (k, col) likewise), and an m64nNk16 reads two core matrices along k.
// - Accumulator ("Matrix Fragments for wgmma.mma_async.m64nNk8"): thread t of the warpgroup, warp
//   w = t / 32, lane l, g = l / 4, q = l % 4:
//     d[i] = D(16 w + g + 8 ((i / 2) % 2), 8 (i / 4) + 2 q + i % 2),   i < N / 2
// - "wgmma.mma_async operation involving type .tf32 will truncate lower 13 bits of the 32-bit
//   input data": round with cvt.rna before storing to shared memory for round-to-nearest TF32.
// - wgmma reads shared memory through the async proxy: writes by the generic proxy need
//   fence.proxy.async before it ("Async Proxy"); its completion (observed by wait_group) makes d
//   visible to the thread.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#if !defined(__CUDACC__)
#include <wgmma_ptx.h>  // the CUDA emulator's instructions (tests/support/cuda_emulator/include)
#endif

namespace engine::kernels {

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
#if defined(__CUDACC__)
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
#else
  return emu::shared_window_address(pointer);
#endif
}

// A descriptor of a K-major operand without swizzle (the layout above); byte offsets are
// multiples of 16 below 2^18.
__device__ __forceinline__ uint64_t k_major_descriptor(const void* start,
                                                       uint32_t leading_byte_offset,
                                                       uint32_t stride_byte_offset) {
  const auto encode = [](uint32_t bytes) { return static_cast<uint64_t>((bytes & 0x3FFFFu) >> 4); };
  return encode(shared_address(start)) | encode(leading_byte_offset) << 16 |
         encode(stride_byte_offset) << 32;  // base offset 0, swizzle mode 0 (none)
}

__device__ __forceinline__ void fence_proxy_async_shared() {
#if !defined(__CUDACC__)
  emu::ptx::fence_proxy_async_shared();
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void wgmma_fence() {
#if !defined(__CUDACC__)
  emu::ptx::wgmma_fence();
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void wgmma_commit_group() {
#if !defined(__CUDACC__)
  emu::ptx::wgmma_commit_group();
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

// kPending: how many of the newest committed groups may still be in flight (an immediate in PTX).
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
#if !defined(__CUDACC__)
  emu::ptx::wgmma_wait_group(kPending);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#else
  __trap();
#endif
}

// Keeps the compiler from moving accesses to the accumulator registers across a wgmma instruction
// (an empty asm that "reads and writes" each): call after wgmma_wait_group, before reading d, and
// before the first wgmma_m64n* on them. Nothing to do in the emulator.
template <int kRegisters>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[kRegisters]) {
#if defined(__CUDACC__)
#pragma unroll
  for (int i = 0; i < kRegisters; ++i) asm volatile("" : "+f"(d[i])::"memory");
#else
  (void)d;
#endif
}

// The accumulators are "+f" operands (read when scale_d, always written); scale-d is a predicate
// set from a register; imm-scale-a and imm-scale-b are 1 (no negation).
__device__ __forceinline__ void wgmma_m64n8k8_tf32(float (&d)[4], uint64_t descriptor_a,
                                                   uint64_t descriptor_b, bool scale_d) {
#if !defined(__CUDACC__)
  emu::ptx::wgmma_m64nNk8_tf32(d, 8, descriptor_a, descriptor_b, scale_d);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(descriptor_a), "l"(descriptor_b), "r"(static_cast<int>(scale_d)));
#else
  (void)d, (void)descriptor_a, (void)descriptor_b, (void)scale_d;
  __trap();
#endif
}

__device__ __forceinline__ void wgmma_m64n16k8_tf32(float (&d)[8], uint64_t descriptor_a,
                                                    uint64_t descriptor_b, bool scale_d) {
#if !defined(__CUDACC__)
  emu::ptx::wgmma_m64nNk8_tf32(d, 16, descriptor_a, descriptor_b, scale_d);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7])
      : "l"(descriptor_a), "l"(descriptor_b), "r"(static_cast<int>(scale_d)));
#else
  (void)d, (void)descriptor_a, (void)descriptor_b, (void)scale_d;
  __trap();
#endif
}

__device__ __forceinline__ void wgmma_m64n128k8_tf32(float (&d)[64], uint64_t descriptor_a,
                                                     uint64_t descriptor_b, bool scale_d) {
#if !defined(__CUDACC__)
  emu::ptx::wgmma_m64nNk8_tf32(d, 128, descriptor_a, descriptor_b, scale_d);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(descriptor_a), "l"(descriptor_b), "r"(static_cast<int>(scale_d)));
#else
  (void)d, (void)descriptor_a, (void)descriptor_b, (void)scale_d;
  __trap();
#endif
}

// BF16 operands (wgmma.mma_async.m64nNk16.f32.bf16.bf16): A 64 x 16 and B 16 x N, both K-major
// (imm-trans-a = imm-trans-b = 0), the same core matrices of 8 rows x 16 bytes holding 8 BF16
// along k, so one instruction spans two core matrices along k (LBO apart); D as above.
__device__ __forceinline__ void wgmma_m64n8k16_bf16(float (&d)[4], uint64_t descriptor_a,
                                                    uint64_t descriptor_b, bool scale_d) {
#if !defined(__CUDACC__)
  emu::ptx::wgmma_m64nNk16_bf16(d, 8, descriptor_a, descriptor_b, scale_d);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3}, "
      "%4, %5, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(descriptor_a), "l"(descriptor_b), "r"(static_cast<int>(scale_d)));
#else
  (void)d, (void)descriptor_a, (void)descriptor_b, (void)scale_d;
  __trap();
#endif
}

__device__ __forceinline__ void wgmma_m64n16k16_bf16(float (&d)[8], uint64_t descriptor_a,
                                                     uint64_t descriptor_b, bool scale_d) {
#if !defined(__CUDACC__)
  emu::ptx::wgmma_m64nNk16_bf16(d, 16, descriptor_a, descriptor_b, scale_d);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, "
      "%8, %9, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7])
      : "l"(descriptor_a), "l"(descriptor_b), "r"(static_cast<int>(scale_d)));
#else
  (void)d, (void)descriptor_a, (void)descriptor_b, (void)scale_d;
  __trap();
#endif
}

__device__ __forceinline__ void wgmma_m64n128k16_bf16(float (&d)[64], uint64_t descriptor_a,
                                                      uint64_t descriptor_b, bool scale_d) {
#if !defined(__CUDACC__)
  emu::ptx::wgmma_m64nNk16_bf16(d, 128, descriptor_a, descriptor_b, scale_d);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "
      "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "
      "%56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(descriptor_a), "l"(descriptor_b), "r"(static_cast<int>(scale_d)));
#else
  (void)d, (void)descriptor_a, (void)descriptor_b, (void)scale_d;
  __trap();
#endif
}

}  // namespace engine::kernels
