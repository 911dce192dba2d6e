// The CUDA emulator's C++ for the sm_90a warpgroup instructions that kernels/common/wgmma.cuh
// wraps in inline assembly on a GPU: wgmma.mma_async with TF32 operands from shared memory through
// matrix descriptors (and BF16 operands, m64nNk16), wgmma.fence, wgmma.commit_group,
// wgmma.wait_group, and fence.proxy.async.
// Written to the PTX ISA (section "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
// Instructions"):
//
// wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32 d, a-desc, b-desc, scale-d, 1, 1 computes
// D = A B + D (D = A B when scale-d is 0) for A 64 x 8, B 8 x N, D 64 x N, by the 128 threads of a
// warpgroup (4 consecutive warps, the first one's index a multiple of 4). Every thread must execute
// it with the same descriptors and N; a thread missing, or different operands, fail the launch.
//
// Matrix descriptor ("Matrix Descriptor Format"), a 64-bit value, each address field the byte
// value's bits 4-17 (matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4):
//   bits  0-13  start address (in the shared state space)
//   bits 16-29  leading dimension byte offset (LBO)
//   bits 32-45  stride dimension byte offset (SBO)
//   bits 49-51  base offset (swizzled modes only)
//   bits 62-63  swizzle mode: 0 none (interleave), 1 128-byte, 2 64-byte, 3 32-byte
// Only mode 0 is emulated (another fails the launch). TF32 has only the K-major layout (the
// transpose immediates exist only for .f16/.bf16). K-major without swizzling ("Canonical
// Layouts": ((8,m),(T,2k)):((1T,SBO),(1,LBO)) in elements, T = 4 for 32-bit elements): the matrix
// is made of core matrices of 8 rows (of A, or columns of B) x 16 bytes (4 TF32 along k), each
// 128 contiguous bytes, a row's 16 bytes after the previous row's; the core matrix next along k is
// LBO bytes further, the one next along M (A) or N (B) SBO bytes further. So, in bytes from the
// start address:
//   A(row, k)  at (row / 8) SBO + (row % 8) 16 + (k / 4) LBO + (k % 4) 4
//   B(k, col)  at (col / 8) SBO + (col % 8) 16 + (k / 4) LBO + (k % 4) 4
// Operands: "wgmma.mma_async operation involving type .tf32 will truncate lower 13 bits of the
// 32-bit input data before multiplication": so does the emulator (unlike mma.sync, whose operands
// the emulator requires converted, a wgmma operand need not be TF32; a kernel that wants
// round-to-nearest rounds when it stages, as kernels/matmul/matmul_wgmma_cuda.cu does).
// Sum: d = (scale-d ? d : 0) + A(row, 0) B(0, col) + ... + A(row, 7) B(7, col) in FP32, one
// rounding per add, ascending k (the ISA leaves order and rounding unspecified; tests bound).
//
// wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 d, a-desc, b-desc, scale-d, 1, 1, 0, 0 is
// the same with A 64 x 16 and B 16 x N of BF16 values (the last two immediates: no transpose, i.e.
// both K-major as above). Its core matrices are the same 8 rows x 16 bytes, now 8 BF16 along k
// (T = 8 for 16-bit elements), so one instruction reads two core matrices along k, LBO apart:
//   A(row, k)  at (row / 8) SBO + (row % 8) 16 + (k / 8) LBO + (k % 8) 2
//   B(k, col)  at (col / 8) SBO + (col % 8) 16 + (k / 8) LBO + (k % 8) 2
// A BF16 value is the upper half of an FP32 one, so the products are exact in FP32; the 16 are
// summed as above, ascending k. The accumulator layout is the m64nNk8 one below (the ISA's D
// fragment is the same for every input type).
//
// Accumulator layout ("Matrix Fragments for wgmma.mma_async.m64nNk8", accumulator D): thread t of
// the warpgroup, in warp w = t / 32 with lane l, g = l / 4, q = l % 4, holds N / 2 floats,
//   d[i] = D(16 w + g + 8 ((i / 2) % 2), 8 (i / 4) + 2 q + i % 2)
// i.e. each warp owns rows 16 w .. 16 w + 15, as the m16n8 C fragment of mma.sync repeated over
// the N / 8 column blocks.
//
// Asynchrony, made visible: wgmma.mma_async only records the instruction (emu::WarpgroupMma) and
// sets this thread's d registers to NaN; wgmma.commit_group closes a group; wgmma.wait_group N
// completes every group but the newest N, in order: each reads A and B from shared memory then
// (the async proxy's view: as of the last fence.proxy.async, see emu::async_proxy_fence_shared),
// and the accumulators land in d when the last pending instruction on them completes. So a kernel
// that reads d before the wait reads NaN, one that lets wgmma read shared memory written with
// ordinary stores (or cp.async) without fence.proxy.async reads stale bytes (NaN at first), and one
// that overwrites a stage before the wait multiplies the new data. Instructions chained on the same
// d (as a k loop issues them) accumulate in order, as on the GPU.
// wgmma.fence: the ISA requires one before the first wgmma.mma_async and between a register access
// and a wgmma.mma_async on the same registers; the emulator asks for one before the first
// wgmma.mma_async after each wgmma.wait_group (stricter: kernels here fence every step, as
// CUTLASS's warpgroup_arrive does), and fails the launch otherwise.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

// ---- the scheduler's part (tests/support/cuda_emulator/scheduler.cpp) ------------------------
namespace emu {

// A warpgroup is 4 consecutive warps of the block, threads 128 w .. 128 w + 127. What each
// thread gives one wgmma.mma_async, which must be the same in all 128:
// The input type of a wgmma.mma_async: .tf32 (k8, 4-byte elements) or .bf16 (k16, 2-byte).
enum class WgmmaInput { kTf32, kBf16 };

struct WarpgroupOperands {
  uint64_t descriptor_a, descriptor_b;
  int n;
  bool scale_d;
  WgmmaInput input;
};
// The instruction's collective part: posts this thread's operands, waits at a warpgroup barrier
// for the 128 threads, and fails the launch when one of them has exited or is outside the block,
// or gave other operands; a second barrier closes it. The threads' operands are compared in the
// scheduler (not read across threads' stacks), and the barriers order no memory for the race
// checker: wgmma's reads of shared memory are the emulator's own (the async proxy's view, below).
void warpgroup_mma_collective(const WarpgroupOperands& mine);

// One wgmma.mma_async.m64nNk8 issued by this thread, until the wgmma.wait_group that completes it:
// its group (the wgmma.commit_group calls before it), its accumulator registers d (n / 2 floats,
// NaN until the wait), the descriptors, scale-d, and the accumulator values the chain of pending
// instructions on d builds (shared by those instructions, written to d when the last completes).
struct WarpgroupMma {
  int group;
  float* d;
  int n;
  uint64_t descriptor_a, descriptor_b;
  bool scale_d;
  WgmmaInput input;
  std::shared_ptr<std::vector<float>> accumulators;
};
// A thread's wgmma state lives in the scheduler (like cp.async's queue: emulator bookkeeping, out
// of the race checker's sight). wgmma.fence marks the thread fenced; warpgroup_mma_issue queues
// an instruction in the open group (false, queueing nothing, when the thread has not executed
// wgmma.fence since its last wgmma.wait_group); warpgroup_mma_chain gives the accumulators of a
// pending instruction on d (null when none); warpgroup_mma_commit closes the open group;
// warpgroup_mma_take_completed hands back, oldest first and one per call, each queued instruction
// of a committed group that is not among the newest `pending` groups, and whether a later pending
// one accumulates into the same d; when none is left it returns false and clears the fence.
void warpgroup_mma_fence();
bool warpgroup_mma_issue(const WarpgroupMma& mma);
std::shared_ptr<std::vector<float>> warpgroup_mma_chain(const float* d);
void warpgroup_mma_commit();
bool warpgroup_mma_take_completed(int pending, WarpgroupMma* mma, bool* chain_goes_on);

// (shared_memory.cpp) The shared window: each __shared__ variable of a block also has an address in
// the block's shared state space, as on a GPU (from 0, the variables in the order the block first
// touched them, each at its alignment, at least 16). shared_window_address is
// __cvta_generic_to_shared; a pointer outside the block's shared memory fails the launch.
uint32_t shared_window_address(const void* pointer);
// The async proxy (wgmma's reads of shared memory) sees shared memory as of the last
// fence.proxy.async by any thread of the block, and 0xFF bytes before the first: a kernel that
// writes shared memory with ordinary stores (or cp.async) and lets wgmma read it without the fence
// reads NaN. (One view per block: a fence by one thread publishes every thread's writes so far,
// so a fence missing in only some threads is not caught.) read_async_proxy_shared copies `bytes`
// at shared-window `address` from that view; bytes outside one shared variable fail the launch.
void async_proxy_fence_shared();
void read_async_proxy_shared(uint32_t address, void* to, std::size_t bytes);

}  // namespace emu

// ---- the instructions --------------------------------------------------------------------------
namespace emu::ptx {

struct WgmmaDescriptorFields {
  uint32_t start, leading_byte_offset, stride_byte_offset;
};

inline WgmmaDescriptorFields decode_wgmma_descriptor(uint64_t descriptor) {
  if ((descriptor >> 62) != 0) fault("wgmma: only the no-swizzle descriptor mode is emulated");
  const auto field = [descriptor](int shift) {
    return static_cast<uint32_t>((descriptor >> shift) & 0x3FFFu) << 4;
  };
  return {field(0), field(16), field(32)};
}

// Byte address of element (row, k) of a K-major no-swizzle operand: A's (row, k) or B's (k, row),
// for elements of `element_bytes` (4: TF32, 2: BF16), 16 / element_bytes of them along k per
// core-matrix row.
inline uint32_t k_major_address(const WgmmaDescriptorFields& f, int row, int k, int element_bytes) {
  const int per_row = 16 / element_bytes;
  return f.start + static_cast<uint32_t>(row / 8) * f.stride_byte_offset +
         static_cast<uint32_t>(row % 8) * 16 +
         static_cast<uint32_t>(k / per_row) * f.leading_byte_offset +
         static_cast<uint32_t>((k % per_row) * element_bytes);
}

// The operand as the tensor core reads it: the async proxy's bytes, the low 13 bits dropped.
inline float truncated_tf32_at(uint32_t address) {
  uint32_t bits;
  read_async_proxy_shared(address, &bits, sizeof bits);
  return __uint_as_float(bits & ~0x1FFFu);
}

// A BF16 operand as the tensor core reads it: the async proxy's two bytes, the upper half of an
// FP32 value.
inline float bf16_at(uint32_t address) {
  uint16_t bits;
  read_async_proxy_shared(address, &bits, sizeof bits);
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

inline void wgmma_fence() { warpgroup_mma_fence(); }

inline void fence_proxy_async_shared() { async_proxy_fence_shared(); }

// Issues one wgmma.mma_async for this thread (d: its n / 2 accumulators) of the given input type.
inline void issue_wgmma(WgmmaInput input, float* d, int n, uint64_t descriptor_a,
                        uint64_t descriptor_b, bool scale_d) {
  warpgroup_mma_collective(WarpgroupOperands{descriptor_a, descriptor_b, n, scale_d, input});
  decode_wgmma_descriptor(descriptor_a);  // fails now on a mode that is not emulated
  decode_wgmma_descriptor(descriptor_b);
  // The accumulator chain on d: the pending instructions' values, or d's as issued.
  std::shared_ptr<std::vector<float>> accumulators = warpgroup_mma_chain(d);
  const bool starts_chain = !accumulators;
  if (starts_chain) accumulators = std::make_shared<std::vector<float>>(d, d + n / 2);
  if (!warpgroup_mma_issue(
          WarpgroupMma{0, d, n, descriptor_a, descriptor_b, scale_d, input, accumulators})) {
    fault("wgmma.mma_async without a wgmma.fence after the last wait_group");
  }
  if (starts_chain) {
    for (int i = 0; i < n / 2; ++i) d[i] = std::nanf("");  // undefined until the wait
  }
}

// wgmma.mma_async.m64nNk8.f32.tf32.tf32
inline void wgmma_m64nNk8_tf32(float* d, int n, uint64_t descriptor_a, uint64_t descriptor_b,
                               bool scale_d) {
  issue_wgmma(WgmmaInput::kTf32, d, n, descriptor_a, descriptor_b, scale_d);
}

// wgmma.mma_async.m64nNk16.f32.bf16.bf16 (K-major A and B: imm-trans-a = imm-trans-b = 0)
inline void wgmma_m64nNk16_bf16(float* d, int n, uint64_t descriptor_a, uint64_t descriptor_b,
                                bool scale_d) {
  issue_wgmma(WgmmaInput::kBf16, d, n, descriptor_a, descriptor_b, scale_d);
}

inline void wgmma_commit_group() { warpgroup_mma_commit(); }

// This thread's accumulators of one instruction: D(row, col) for each of its n / 2 elements.
inline void complete_wgmma(const WarpgroupMma& mma) {
  const WgmmaDescriptorFields a = decode_wgmma_descriptor(mma.descriptor_a);
  const WgmmaDescriptorFields b = decode_wgmma_descriptor(mma.descriptor_b);
  const int thread = static_cast<int>(
      thread_idx().x + block_dim().x * (thread_idx().y + block_dim().y * thread_idx().z));
  const int in_group = thread % 128;  // its place in the warpgroup
  const int warp = in_group / warpSize, g = in_group % warpSize / 4, q = in_group % 4;
  std::vector<float>& acc = *mma.accumulators;
  for (int i = 0; i < mma.n / 2; ++i) {
    const int row = 16 * warp + g + 8 * (i / 2 % 2), col = 8 * (i / 4) + 2 * q + i % 2;
    float sum = mma.scale_d ? acc[static_cast<std::size_t>(i)] : 0.0f;
    if (mma.input == WgmmaInput::kTf32) {
      for (int k = 0; k < 8; ++k) {
        sum += truncated_tf32_at(k_major_address(a, row, k, 4)) *
               truncated_tf32_at(k_major_address(b, col, k, 4));
      }
    } else {
      for (int k = 0; k < 16; ++k) {
        sum += bf16_at(k_major_address(a, row, k, 2)) * bf16_at(k_major_address(b, col, k, 2));
      }
    }
    acc[static_cast<std::size_t>(i)] = sum;
  }
}

inline void wgmma_wait_group(int pending) {
  WarpgroupMma mma;
  bool chain_goes_on = false;
  while (warpgroup_mma_take_completed(pending, &mma, &chain_goes_on)) {
    complete_wgmma(mma);
    if (!chain_goes_on) std::memcpy(mma.d, mma.accumulators->data(), sizeof(float) * (mma.n / 2));
  }
}

}  // namespace emu::ptx
