// Host entry points of tests/emulator/mma_ptx_kernels.cu; each launches one block and returns
// cudaGetLastError(). Pointers are device memory.
#pragma once

#include <cuda_runtime.h>

namespace sample {

// One warp: lane l copies src[l] into shared memory with a 4-byte cp.async, commits, and writes
// what shared memory holds there before the wait to before[l] and after cp.async.wait_group 0 to
// after[l].
cudaError_t cp_async_read_before_wait(const float* src, float* before, float* after);
// One thread copies src[0..4) (group 0, 16 bytes) and src[4..8) (group 1) into shared memory, then
// writes shared[0..8) to after_wait1[0..8) after cp.async.wait_group 1 and to after_wait0 after
// wait_group 0. It also copies 16 bytes from src + 8 reading only 8 of them (src-size 8) and writes
// those 4 shared floats to zero_filled[0..4) after the last wait.
cudaError_t cp_async_groups(const float* src, float* after_wait1, float* after_wait0,
                            float* zero_filled);
// One thread issues a 16-byte cp.async into shared memory `shared_offset` floats in (0: aligned).
cudaError_t cp_async_aligned(const float* src, int shared_offset);
// One mma.sync.m16n8k8 TF32 by `threads` lanes (32: a whole warp) with every A and B register
// holding `a_and_b_bits` (TF32 bit patterns or not); d[4 l + i] = lane l's d[i], C = 0.
cudaError_t mma_tf32_bits(unsigned a_and_b_bits, unsigned threads, float* d);

// What wgmma_ones does wrong (or not).
enum class WgmmaMistake {
  kNone,                 // fence.proxy.async, barrier, wgmma.fence, mma, commit, wait: right
  kNoProxyFence,         // shared memory written with ordinary stores, no fence.proxy.async
  kNoWgmmaFence,         // no wgmma.fence before the wgmma.mma_async
  kOverwriteBeforeWait,  // A rewritten to 2 (and fenced) after the issue, before the wait
  kStoreWhileInFlight,   // A rewritten to 2 after the issue, not fenced, before the wait
};
// `threads` threads (128: one warpgroup) store A (64 x 8) and B (8 x 8) of ones into shared memory
// (K-major, no swizzle) and run one wgmma.mma_async.m64n8k8 TF32 with scale-d 0, committing and
// waiting for it; thread t writes its 4 accumulators as read right after the commit to
// early[4 t + i] and after wgmma.wait_group 0 to d[4 t + i].
cudaError_t wgmma_ones(WgmmaMistake mistake, unsigned threads, float* early, float* d);

}  // namespace sample
