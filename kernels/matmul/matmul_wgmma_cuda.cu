// matmul on sm_90a's warpgroup MMA (wgmma.mma_async, TF32 or BF16) with a cp.async pipeline:
// C (+)= op(A) op(B) with TF32 or BF16 operands and FP32 accumulation. Chosen by
// ENGINE_TC_GEMM=wgmma (engine/backend.h) for matmul under the tf32 and bf16 policies; refused
// (engine::Error) on a device that is not compute capability 9.0 or a build without sm_90a
// (matmul_wgmma.h). The TF32 kernel is described first; the BF16 one differs where it says so
// (its section below).
//
// Math:    C[i, j] (+)= sum_p tf32(op(A)[i, p]) tf32(op(B)[p, j]), each operand rounded by cvt.rna
//          (round to nearest, ties away from zero) in shared memory before wgmma reads it: wgmma
//          itself would truncate the low 13 bits, which is not the TF32 contract of the other
//          kernels (tests/ops/matmul_mma_cuda_test.cpp's bound and hand-worked rounding hold here
//          too). Each product is exact in FP32 and the sums round in FP32, 8 p per instruction in
//          an order the ISA leaves open. With `accumulate`, C's old value is added once at the end.
// Layout:  what the PTX ISA documents and kernels/common/wgmma.cuh lists (checked on one
//          instruction by tests/kernels/wgmma_test.cpp, which a GPU check runs first): K-major
//          operands without swizzle, core matrices of 8 rows x 4 p (16 bytes, 128 contiguous bytes
//          per core matrix); descriptor bits 0-13 / 16-29 / 32-45 = start / LBO / SBO >> 4; the
//          accumulator of thread t (warp w of its warpgroup, lane g * 4 + q) d[i] = D(16 w + g +
//          8 ((i / 2) % 2), 8 (i / 4) + 2 q + i % 2); tf32 reads the upper 19 bits; wgmma reads
//          shared memory through the async proxy, so ordinary stores and cp.async need
//          fence.proxy.async first; d may be read only after wgmma.wait_group.
// Tile:    block tile 128 (rows of C) x 128 (columns) x 16 (p), 256 threads = 2 warpgroups, each a
//          64 x 128 slice of C as wgmma.m64n128k8 (64 FP32 accumulators per thread), two
//          instructions per stage. Why 128 x 128: with N = 128 one instruction covers the block's
//          columns (the largest N whose 64 accumulators leave registers for the rest), and a
//          square tile reads the least per FLOP (32 FLOP per byte of a stage, against 21.3 for
//          matmul_mma_cuda's 128 x 64); two warpgroups rather than one 64 x 128 so that each stage
//          of B is read by two.
// Stage:   A and B each [p / 4][rows / 8][8 rows][4 p] floats (16 KiB per stage for both), so
//          LBO = 2048 bytes (next 4 p), SBO = 128 bytes (next 8 rows); warpgroup w's A starts 64 w
//          rows (1 KiB) in. Three stages fill the 48 KiB a block gets without opting in (dynamic
//          shared memory, so that the overlapped variant below can have more).
// Pipeline: while the warpgroups multiply stage s, stages s + 1 and s + 2 are in flight
//          (cp.async, global -> shared); per stage: cp.async.wait_group 1, this thread rounds the
//          elements it copied (cvt.rna, in place), fence.proxy.async, __syncthreads, the copies of
//          stage s + 2 issued, wgmma.fence, two wgmma.mma_async, commit, wgmma.wait_group 0 (so the
//          stage the next step overwrites is no longer read: the copies, not the tensor cores, are
//          what overlaps).
// Overlap: the variant WgmmaPipeline::kOverlapped (matmul_wgmma.h) keeps one multiply in flight
//          across a step (wgmma.wait_group 1): four stages (64 KiB, by the opt-in), copies two
//          stages ahead, and the stage the copies refill is the one whose multiply the previous
//          step's wait completed in every warpgroup (the barrier orders it). The tensor cores then
//          run while the next stage lands and is rounded; expected nearer 40-50 % of the TF32
//          peak if the serial wait was what bound the kernel. Both variants are compiled in and
//          chosen per call, so one GPU run times them side by side (dml bench's wgmma and
//          wgmma-overlap rows). The emulator fails a launch whose copies or stores reach a stage
//          a multiply in flight still reads (tests/emulator/mma_ptx_test.cpp).
// Loads:   a K-major operand (A untransposed, B transposed) whose row length is a multiple of 4
//          floats and whose pointer is 16-byte aligned goes in 16-byte copies (one core-matrix row
//          each); otherwise, and always for an operand stored MN-contiguous (A^T, B untransposed:
//          TF32 wgmma has no transposed mode), in 4-byte copies, consecutive threads on consecutive
//          rows of the stage so the global reads coalesce. Copies outside the operand read nothing
//          and write zeros (src-size 0), so odd M, N and K need no other edge code.
// Cost:    2 m n k FLOPs; 4 (m k + k n + m n) bytes at least. Per block and 16 p it reads 16 KiB
//          for 524 kFLOP. At an H100's ~5.5 TB/s of L2 that feeds about 176 TFLOP/s, and the
//          serialized wait per stage (no wgmma overlaps the next stage's rounding and barrier)
//          costs more: expect about 25-35% of the dense TF32 peak (~495 TFLOP/s on H100/H200 SXM),
//          above matmul_mma_cuda's ~25% bound and below cuBLAS's (TMA, 128-byte swizzle, 4+ stages,
//          warp-specialized producers). Expected, not measured: no GPU was available when it was
//          written.
// BF16:    wgmma reads BF16 from shared memory, so cp.async lands FP32 in one of two FP32 stages
//          (the TF32 layout), each thread converts what its own copies brought with
//          __float2bfloat16 (ties to even, the policy's rounding) into one of two BF16 stages
//          [p / 8][rows / 8][8 rows][8 p] (LBO 2048, SBO 128 bytes, as TF32's: a core matrix is
//          16 bytes wide either way), and each warpgroup issues one wgmma.m64n128k16 per stage of
//          16 p. 2 x 16 + 2 x 8 KiB = 48 KiB (overlapped: 3 FP32 + 3 BF16 stages, 72 KiB, the
//          third BF16 stage because a warpgroup may still multiply stage s - 2 while another
//          converts stage s). The copies of stage s + 1 overlap stage s's
//          multiply; the conversion and its barrier do not overlap anything. Same FLOPs and
//          global bytes as TF32, each instruction twice as deep, the BF16 peak (~990 TFLOP/s
//          dense) twice TF32's: expect the same time per stage as the TF32 kernel, so about
//          15-20 % of the BF16 peak, bounded by the serialized convert-barrier-wait per stage.
//          Expected, not measured.
// Indexing: 32-bit within each matrix (each < 2^31 elements, checked).
#include <atomic>
#include <climits>
#include <cstdint>
#include <mutex>
#include <set>
#include <type_traits>
#include <utility>

#include <cuda_bf16.h>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/mma_sync.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/matmul/matmul_wgmma.h"

namespace engine::kernels {

namespace {

constexpr int kTileM = 128;                // rows of C per block
constexpr int kTileN = 128;                // columns of C per block: one m64n128k8's N
constexpr int kTileK = 16;                 // p per stage: two instructions deep
constexpr int kThreads = 256;              // 2 warpgroups
constexpr int kWarpgroupThreads = 128;     // 4 warps
constexpr int kWarpgroupM = 64;            // each warpgroup's rows of C
constexpr int kInstructionK = 8;           // p per wgmma.m64nNk8
constexpr int kAccumulators = kTileN / 2;  // per thread, m64n128's N / 2
constexpr int kCoreRows = 8, kCoreP = 4;   // a core matrix: 8 rows x 16 bytes
// Byte offsets of the stage layout [p / 4][rows / 8][8][4]: the next 4 p, the next 8 rows.
constexpr uint32_t kLeadingByteOffset = kTileM * kCoreP * sizeof(float);  // 2048 (kTileM == kTileN)
constexpr uint32_t kStrideByteOffset = kCoreRows * kCoreP * sizeof(float);  // 128
static_assert(kTileM == kTileN, "one stage layout (and LBO) for both operands");

struct alignas(128) Stage {
  float a[kTileM * kTileK];
  float b[kTileN * kTileK];
};

// Index of (row, p) in an operand's stage.
__device__ __forceinline__ int stage_index(int row, int p) {
  return (p / kCoreP) * (kTileM * kCoreP) + (row / kCoreRows) * (kCoreRows * kCoreP) +
         (row % kCoreRows) * kCoreP + p % kCoreP;
}

// Calls visit(row, p, elements) for each copy this thread makes of one operand's 128 rows x 16 p
// of a stage: with `vectors`, 16-byte copies of 4 p (element (row, p) to (row, p + 3)), else
// 4-byte ones, consecutive threads on consecutive rows (coalesced when the operand is stored
// row-contiguous). Issuing the copies, rounding them in place and converting them to BF16 all go
// through it, so each thread touches only the elements its own cp.async wrote.
template <typename Visit>
__device__ __forceinline__ void for_each_own_copy(bool vectors, Visit visit) {
  const int per_copy = vectors ? kCoreP : 1;
  const int copies = kTileM * kTileK / per_copy;
  for (int id = threadIdx.x; id < copies; id += kThreads) {
    if (vectors) {
      visit(id / (kTileK / kCoreP), id % (kTileK / kCoreP) * kCoreP, per_copy);
    } else {
      visit(id % kTileM, id / kTileM, per_copy);
    }
  }
}

// Issues (cp.async) this thread's copies of rows [row0, row0 + 128) x p [k0, k0 + 16) of an
// operand with `rows` rows and k p-values, stored p-contiguous (element (row, p) at src[row k + p])
// or row-contiguous (at src[p rows + row]), into `stage` in the K-major TF32 layout. `vectors`
// (p-contiguous only) needs a multiple of 4 floats per row and src 16-byte aligned, so that each
// 16-byte copy is wholly inside or wholly outside. Copies outside the operand write zeros.
__device__ __forceinline__ void stage_operand(float* stage, const float* __restrict__ src,
                                              bool p_contiguous, bool vectors, int rows, int k,
                                              int row0, int k0) {
  for_each_own_copy(vectors, [&](int row, int p, int elements) {
    const int global_row = row0 + row, global_p = k0 + p;
    const bool inside = global_row < rows && global_p < k;
    const float* from =
        inside ? src + (p_contiguous ? global_row * k + global_p : global_p * rows + global_row)
               : src;
    float* to = stage + stage_index(row, p);
    if (elements == kCoreP) {
      cp_async_16(to, from, inside ? 16 : 0);
    } else {
      cp_async_4(to, from, inside ? 4 : 0);
    }
  });
}

// What a block reads (each kernel calls it `sources`): both operands, how each is stored, and the
// origin (m0, n0) of its C tile.
struct BlockOperands {
  const float* a;
  const float* b;
  bool a_p_contiguous, b_p_contiguous, a_vectors, b_vectors;
  int m, n, k, m0, n0;
};

// Block (x, y)'s operands for C tile (y, x). op(A) is p-contiguous when A is stored [m, k]; op(B)
// when B is stored transposed [n, k].
__device__ __forceinline__ BlockOperands block_operands(int m, int n, int k, const float* a,
                                                        const float* b, bool trans_a, bool trans_b,
                                                        bool a_vectors, bool b_vectors) {
  const int m0 = static_cast<int>(blockIdx.y) * kTileM;
  const int n0 = static_cast<int>(blockIdx.x) * kTileN;
  return BlockOperands{a, b, !trans_a, trans_b, a_vectors, b_vectors, m, n, k, m0, n0};
}

// Issues this thread's copies of both operands' p [k0, k0 + 16) into `stage`.
__device__ __forceinline__ void stage_operands(Stage& stage, const BlockOperands& o, int k0) {
  stage_operand(stage.a, o.a, o.a_p_contiguous, o.a_vectors, o.m, o.k, o.m0, k0);
  stage_operand(stage.b, o.b, o.b_p_contiguous, o.b_vectors, o.n, o.k, o.n0, k0);
}

// The start of both kernels' pipelines: the accumulators zeroed, and the FP32 stages of steps
// 0 .. kLookahead - 1 in flight, one commit group each (empty past the last step, so that every
// step's cp_async_wait<kLookahead - 1> finds its own group complete however few steps there are).
template <int kLookahead>
__device__ __forceinline__ void start_pipeline(Stage* stages, const BlockOperands& o, int steps,
                                               float (&acc)[kAccumulators]) {
#pragma unroll
  for (int i = 0; i < kAccumulators; ++i) acc[i] = 0.0f;
  for (int s = 0; s < kLookahead; ++s) {
    if (s < steps) stage_operands(stages[s], o, s * kTileK);
    cp_async_commit();
  }
}

// Rounds this thread's copies in `stage` to TF32 in place (cvt.rna), after they landed.
__device__ __forceinline__ void round_own_copies_to_tf32(float* stage, bool vectors) {
  for_each_own_copy(vectors, [&](int row, int p, int elements) {
    float* at = stage + stage_index(row, p);
    for (int e = 0; e < elements; ++e) at[e] = __uint_as_float(float_to_tf32(at[e]));
  });
}

// The epilogue from registers, in the accumulator layout of kernels/common/wgmma.cuh: warpgroup
// `warpgroup`'s 64 x 128 slice of the block's tile at (m0, n0), clipped to m x n.
__device__ __forceinline__ void store_accumulators(const float (&acc)[kAccumulators], int m, int n,
                                                   int m0, int n0, int warpgroup,
                                                   float* __restrict__ c, bool accumulate) {
  const int in_group = threadIdx.x % kWarpgroupThreads;
  const int warp = in_group / 32, g = in_group % 32 / 4, q = in_group % 4;
#pragma unroll
  for (int i = 0; i < kAccumulators; ++i) {
    const int row = m0 + warpgroup * kWarpgroupM + 16 * warp + g + 8 * (i / 2 % 2);
    const int col = n0 + 8 * (i / 4) + 2 * q + i % 2;
    if (row >= m || col >= n) continue;
    float* out = c + row * n + col;
    *out = accumulate ? *out + acc[i] : acc[i];
  }
}

// Block (x, y) computes the 128 x 128 tile (y, x) of C. kStages stages of shared memory
// (dynamic: kStages x 16 KiB); kPending wgmma groups stay in flight across a step (0: each step
// waits for its own multiply; 1: the multiply of stage s runs on while stage s + 1 is rounded).
// Copies run kLookahead = kStages - 1 - kPending stages ahead of the one multiplied.
template <int kStages, int kPending>
__global__ void __launch_bounds__(kThreads)
    tf32_wgmma_gemm_kernel(int m, int n, int k, const float* __restrict__ a,
                           const float* __restrict__ b, bool trans_a, bool trans_b, bool a_vectors,
                           bool b_vectors, float* __restrict__ c, bool accumulate) {
  static_assert(kPending == 0 || kPending == 1, "one multiply in flight at most");
  constexpr int kLookahead = kStages - 1 - kPending;
  static_assert(kLookahead >= 1, "at least one stage of copies ahead");
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  Stage* stages = reinterpret_cast<Stage*>(shared_bytes);
  const BlockOperands sources =
      block_operands(m, n, k, a, b, trans_a, trans_b, a_vectors, b_vectors);
  const int warpgroup = threadIdx.x / kWarpgroupThreads;
  const int steps = (k + kTileK - 1) / kTileK;
  float acc[kAccumulators];
  start_pipeline<kLookahead>(stages, sources, steps, acc);
  for (int step = 0; step < steps; ++step) {
    Stage& stage = stages[step % kStages];
    cp_async_wait<kLookahead - 1>();  // this thread's copies of stage `step` have landed:
    round_own_copies_to_tf32(stage.a, a_vectors);  // round them to TF32 in place,
    round_own_copies_to_tf32(stage.b, b_vectors);
    fence_proxy_async_shared();  // make them visible to wgmma's async proxy,
    __syncthreads();             // and wait for everyone's. Every warpgroup has passed the last
    // step's wgmma_wait_group<kPending>, so stage step - 1 - kPending is read by no multiply: its
    // slot is the one the copies of stage step + kLookahead fill.
    const int next = step + kLookahead;
    if (next < steps) stage_operands(stages[next % kStages], sources, next * kTileK);
    cp_async_commit();
    wgmma_fence();
    wgmma_fence_operands(acc);
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += kInstructionK) {
      const int p_block = kk / kCoreP;
      const uint64_t descriptor_a =
          k_major_descriptor(stage.a + stage_index(warpgroup * kWarpgroupM, kk), kLeadingByteOffset,
                             kStrideByteOffset);
      const uint64_t descriptor_b = k_major_descriptor(stage.b + p_block * kTileN * kCoreP,
                                                       kLeadingByteOffset, kStrideByteOffset);
      wgmma_m64n128k8_tf32(acc, descriptor_a, descriptor_b, true);
    }
    wgmma_commit_group();
    wgmma_wait_group<kPending>();
    wgmma_fence_operands(acc);
  }
  wgmma_wait_group<0>();
  wgmma_fence_operands(acc);
  store_accumulators(acc, m, n, sources.m0, sources.n0, warpgroup, c, accumulate);
}

// ---- BF16: wgmma.m64n128k16, one instruction per warpgroup and stage ----
// wgmma reads BF16 from shared memory, so the FP32 operands cannot go there by cp.async alone:
// they land in an FP32 stage (the TF32 layout above), each thread converts the elements its own
// copies brought (__float2bfloat16, ties to even) into a BF16 stage, and wgmma reads that.
constexpr int kBf16CoreP = 8;  // a BF16 core matrix: 8 rows x 8 p (16 bytes)
// [p / 8][rows / 8][8][8] BF16: the next 8 p 2048 bytes on, the next 8 rows 128 bytes on.
constexpr uint32_t kBf16LeadingByteOffset = kTileM * kBf16CoreP * 2;
constexpr uint32_t kBf16StrideByteOffset = kCoreRows * kBf16CoreP * 2;
static_assert(kTileK == 16, "one m64n128k16 per stage");

struct alignas(128) Bf16Stage {
  __nv_bfloat16 a[kTileM * kTileK];
  __nv_bfloat16 b[kTileN * kTileK];
};

// Index of (row, p) in a BF16 stage's operand.
__device__ __forceinline__ int bf16_stage_index(int row, int p) {
  return (p / kBf16CoreP) * (kTileM * kBf16CoreP) + (row / kCoreRows) * (kCoreRows * kBf16CoreP) +
         (row % kCoreRows) * kBf16CoreP + p % kBf16CoreP;
}

// Converts this thread's copies in the FP32 stage `from` (after they landed) into `to`.
__device__ __forceinline__ void convert_own_copies_to_bf16(const float* from, __nv_bfloat16* to,
                                                           bool vectors) {
  for_each_own_copy(vectors, [&](int row, int p, int elements) {
    const float* at = from + stage_index(row, p);  // p .. p + elements - 1 are adjacent here
    for (int e = 0; e < elements; ++e) to[bf16_stage_index(row, p + e)] = __float2bfloat16(at[e]);
  });
}

// Block (x, y) computes the 128 x 128 tile (y, x) of C; arguments as tf32_wgmma_gemm_kernel's.
// Dynamic shared memory: kFloatStages FP32 stages (16 KiB each, what cp.async writes), then
// 2 + kPending BF16 stages (8 KiB each, what wgmma reads). Copies run kFloatStages - 1 stages
// ahead (the FP32 stage they overwrite was converted a step ago). A thread converts stage s before
// the barrier of step s, while a warpgroup behind it may still multiply stage s - 1 - kPending
// (it passed step s - 1's barrier, not yet its wgmma_wait_group): so 2 + kPending BF16 stages.
template <int kFloatStages, int kPending>
__global__ void __launch_bounds__(kThreads)
    bf16_wgmma_gemm_kernel(int m, int n, int k, const float* __restrict__ a,
                           const float* __restrict__ b, bool trans_a, bool trans_b, bool a_vectors,
                           bool b_vectors, float* __restrict__ c, bool accumulate) {
  static_assert(kPending == 0 || kPending == 1, "one multiply in flight at most");
  constexpr int kLookahead = kFloatStages - 1;
  constexpr int kBf16Stages = 2 + kPending;
  static_assert(kLookahead >= 1, "at least one stage of copies ahead");
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  Stage* floats = reinterpret_cast<Stage*>(shared_bytes);
  Bf16Stage* bf16_stages =
      reinterpret_cast<Bf16Stage*>(shared_bytes + kFloatStages * sizeof(Stage));
  const BlockOperands sources =
      block_operands(m, n, k, a, b, trans_a, trans_b, a_vectors, b_vectors);
  const int warpgroup = threadIdx.x / kWarpgroupThreads;
  const int steps = (k + kTileK - 1) / kTileK;
  float acc[kAccumulators];
  start_pipeline<kLookahead>(floats, sources, steps, acc);
  for (int step = 0; step < steps; ++step) {
    const Stage& staged = floats[step % kFloatStages];
    Bf16Stage& operands = bf16_stages[step % kBf16Stages];
    cp_async_wait<kLookahead - 1>();  // this thread's copies of stage `step` have landed:
    convert_own_copies_to_bf16(staged.a, operands.a, a_vectors);  // convert them to BF16,
    convert_own_copies_to_bf16(staged.b, operands.b, b_vectors);
    fence_proxy_async_shared();          // make them visible to wgmma's async proxy,
    __syncthreads();                     // and wait for everyone's: all are done converting stage
    const int next = step + kLookahead;  // step - 1, whose FP32 slot the next copies fill
    if (next < steps) stage_operands(floats[next % kFloatStages], sources, next * kTileK);
    cp_async_commit();
    wgmma_fence();
    wgmma_fence_operands(acc);
    const uint64_t descriptor_a =
        k_major_descriptor(operands.a + bf16_stage_index(warpgroup * kWarpgroupM, 0),
                           kBf16LeadingByteOffset, kBf16StrideByteOffset);
    const uint64_t descriptor_b =
        k_major_descriptor(operands.b, kBf16LeadingByteOffset, kBf16StrideByteOffset);
    wgmma_m64n128k16_bf16(acc, descriptor_a, descriptor_b, true);
    wgmma_commit_group();
    wgmma_wait_group<kPending>();
    wgmma_fence_operands(acc);
  }
  wgmma_wait_group<0>();
  wgmma_fence_operands(acc);
  store_accumulators(acc, m, n, sources.m0, sources.n0, warpgroup, c, accumulate);
}

// The shared memory of each variant, and the launches.
template <int kStages, int kPending>
constexpr int tf32_shared_bytes() {
  return kStages * int(sizeof(Stage));
}
template <int kFloatStages, int kPending>
constexpr int bf16_shared_bytes() {
  return kFloatStages * int(sizeof(Stage)) + (2 + kPending) * int(sizeof(Bf16Stage));
}
static_assert(tf32_shared_bytes<3, 0>() == 49152 && bf16_shared_bytes<2, 0>() == 49152,
              "the serial pipelines fit the 48 KiB a block gets without opting in");
static_assert(tf32_shared_bytes<4, 1>() == 65536 && bf16_shared_bytes<3, 1>() == 73728,
              "the overlapped pipelines' 64 and 72 KiB (opt-in, below 227 KiB)");

// The layout tests' instruction (matmul_wgmma.h): images in, registers out. TF32 copies its images
// as they are (kWgmmaProbeImageFloats floats each; the instruction truncates them itself); BF16
// converts element i to BF16 element i (kWgmmaBf16ProbeImageElements each, ties to even).
struct alignas(128) Tf32ProbeImages {
  static constexpr int kElements = kWgmmaProbeImageFloats;
  float a[kElements];
  float b[kElements];
  static __device__ __forceinline__ float stored(float x) { return x; }
};
struct alignas(128) Bf16ProbeImages {
  static constexpr int kElements = kWgmmaBf16ProbeImageElements;
  __nv_bfloat16 a[kElements];
  __nv_bfloat16 b[kElements];
  static __device__ __forceinline__ __nv_bfloat16 stored(float x) { return __float2bfloat16(x); }
};

template <int kN, bool kBf16>
__global__ void __launch_bounds__(kWarpgroupThreads)
    wgmma_probe_kernel(const float* a_image, const float* b_image, uint32_t a_leading,
                       uint32_t a_stride, uint32_t b_leading, uint32_t b_stride,
                       const float* c_registers, bool scale_d, float* d_registers) {
  using Images = std::conditional_t<kBf16, Bf16ProbeImages, Tf32ProbeImages>;
  __shared__ Images images;
  for (int i = threadIdx.x; i < Images::kElements; i += kWarpgroupThreads) {
    images.a[i] = Images::stored(a_image[i]);
    images.b[i] = Images::stored(b_image[i]);
  }
  fence_proxy_async_shared();
  __syncthreads();
  float d[kN / 2];
  for (int i = 0; i < kN / 2; ++i) d[i] = c_registers[(kN / 2) * threadIdx.x + i];
  const uint64_t descriptor_a = k_major_descriptor(images.a, a_leading, a_stride);
  const uint64_t descriptor_b = k_major_descriptor(images.b, b_leading, b_stride);
  wgmma_fence();
  wgmma_fence_operands(d);
  if constexpr (kBf16 && kN == 8) {
    wgmma_m64n8k16_bf16(d, descriptor_a, descriptor_b, scale_d);
  } else if constexpr (kBf16 && kN == 16) {
    wgmma_m64n16k16_bf16(d, descriptor_a, descriptor_b, scale_d);
  } else if constexpr (kBf16) {
    wgmma_m64n128k16_bf16(d, descriptor_a, descriptor_b, scale_d);
  } else if constexpr (kN == 8) {
    wgmma_m64n8k8_tf32(d, descriptor_a, descriptor_b, scale_d);
  } else if constexpr (kN == 16) {
    wgmma_m64n16k8_tf32(d, descriptor_a, descriptor_b, scale_d);
  } else {
    wgmma_m64n128k8_tf32(d, descriptor_a, descriptor_b, scale_d);
  }
  wgmma_commit_group();
  wgmma_wait_group<0>();
  wgmma_fence_operands(d);
  for (int i = 0; i < kN / 2; ++i) d_registers[(kN / 2) * threadIdx.x + i] = d[i];
}

bool aligned_16(const float* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

// The kernels hold wgmma only where nvcc compiled them for sm_90a (CMakeLists.txt builds this file
// for 90a in place of 90, and defines ENGINE_WGMMA_SM90A then); the emulator runs them anyway.
#if !defined(__CUDACC__) || defined(ENGINE_WGMMA_SM90A)
constexpr bool kBuiltForSm90a = true;
#else
constexpr bool kBuiltForSm90a = false;
#endif

constexpr int kMaxDevices = 64;

// Lets `kernel` launch with `bytes` of dynamic shared memory: past 48 KiB that takes
// cudaFuncAttributeMaxDynamicSharedMemorySize, set once per kernel and device (an attribute of
// the function in the device's context). (Up to 48 KiB nothing is needed: the serial variants.)
template <typename Kernel>
void allow_dynamic_shared(Kernel* kernel, int bytes) {
  static std::mutex mutex;
  static std::set<std::pair<const void*, int>> done;  // (kernel, device)
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device), "wgmma: cudaGetDevice");
  const std::pair<const void*, int> key(reinterpret_cast<const void*>(kernel), device);
  std::lock_guard<std::mutex> lock(mutex);
  if (done.count(key) != 0) return;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
             "wgmma: cudaFuncSetAttribute(MaxDynamicSharedMemorySize ", bytes, ")");
  done.insert(key);
}

void require_wgmma(const char* what) {
  const char* reason = wgmma_unsupported_reason();
  ENGINE_CHECK(reason[0] == '\0', what, ": ", reason);
}

// One probe instruction (n = 8, 16 or 128) of either type; `what` names the caller.
template <bool kBf16>
void launch_wgmma_probe(const char* what, int n, const float* a_image, const float* b_image,
                        uint32_t a_leading, uint32_t a_stride, uint32_t b_leading,
                        uint32_t b_stride, const float* c_registers, bool scale_d,
                        float* d_registers) {
  require_wgmma(what);
  ENGINE_CHECK(n == 8 || n == 16 || n == 128, what, ": n=", n, " (the probe has N = 8, 16, 128)");
  if (n == 8) {
    wgmma_probe_kernel<8, kBf16><<<1, kWarpgroupThreads, 0, current_stream()>>>(
        a_image, b_image, a_leading, a_stride, b_leading, b_stride, c_registers, scale_d,
        d_registers);
  } else if (n == 16) {
    wgmma_probe_kernel<16, kBf16><<<1, kWarpgroupThreads, 0, current_stream()>>>(
        a_image, b_image, a_leading, a_stride, b_leading, b_stride, c_registers, scale_d,
        d_registers);
  } else {
    wgmma_probe_kernel<128, kBf16><<<1, kWarpgroupThreads, 0, current_stream()>>>(
        a_image, b_image, a_leading, a_stride, b_leading, b_stride, c_registers, scale_d,
        d_registers);
  }
  CUDA_CHECK_LAUNCH(what, " n=", n);
}

}  // namespace

const char* wgmma_unsupported_reason() {
  if (!kBuiltForSm90a) {
    return "wgmma kernels not built (CMAKE_CUDA_ARCHITECTURES has no 90, so no sm_90a code): use "
           "ENGINE_TC_GEMM=mma or wmma";
  }
  // The current device's compute capability, asked once per device (cudaGetDeviceProperties is
  // too slow for every GEMM): 0 unknown, else 10 major + minor.
  static std::atomic<int> capability[kMaxDevices];
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device), "wgmma: cudaGetDevice");
  ENGINE_CHECK(device >= 0 && device < kMaxDevices, "wgmma: device ", device, " out of range");
  if (capability[device].load(std::memory_order_relaxed) == 0) {
    cudaDeviceProp properties;
    CUDA_CHECK(cudaGetDeviceProperties(&properties, device), "wgmma: cudaGetDeviceProperties");
    capability[device].store(10 * properties.major + properties.minor, std::memory_order_relaxed);
  }
  if (capability[device].load(std::memory_order_relaxed) == 90) return "";
  return "wgmma needs a GPU of compute capability 9.0 (H100, H200: sm_90a code runs on nothing "
         "else); this one is not: use ENGINE_TC_GEMM=mma or wmma";
}

void matmul_wgmma_cuda(int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                       bool trans_a, bool trans_b, float* c, bool accumulate, Precision precision,
                       WgmmaPipeline pipeline) {
  ENGINE_CHECK(m >= 0 && n >= 0 && k >= 0 && m * k < INT_MAX && k * n < INT_MAX && m * n < INT_MAX,
               "matmul_wgmma_cuda: m=", m, " n=", n, " k=", k,
               " is negative or needs 64-bit indexing (the kernel indexes in 32 bits)");
  ENGINE_CHECK(precision != Precision::Fp32,
               "matmul_wgmma_cuda: tensor cores need precision tf32 or bf16, not fp32");
  require_wgmma("matmul_wgmma_cuda");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C unchanged when accumulating, else zeros
    if (!accumulate) cuda_memset_zero(c, static_cast<size_t>(m * n) * sizeof(float));
    return;
  }
  // 16-byte copies where the operand is K-major (k contiguous) with 16-byte aligned rows.
  const bool a_vectors = !trans_a && k % 4 == 0 && aligned_16(a);
  const bool b_vectors = trans_b && k % 4 == 0 && aligned_16(b);
  const dim3 grid(static_cast<unsigned>(ceil_div(n, kTileN)),
                  static_cast<unsigned>(ceil_div(m, kTileM)));
  ENGINE_CHECK(grid.y <= 65535, "matmul_wgmma_cuda: m=", m, " has too many row tiles for the grid");
  const bool tf32 = precision == Precision::Tf32;
  const bool overlapped = pipeline == WgmmaPipeline::kOverlapped;
  // Four launches written out, so that each names its kernel (the emulator's resource check and
  // the profiler look kernels up by name).
  if (tf32 && !overlapped) {
    constexpr int bytes = tf32_shared_bytes<3, 0>();
    tf32_wgmma_gemm_kernel<3, 0><<<grid, kThreads, bytes, current_stream()>>>(
        int(m), int(n), int(k), a, b, trans_a, trans_b, a_vectors, b_vectors, c, accumulate);
  } else if (tf32) {
    constexpr int bytes = tf32_shared_bytes<4, 1>();
    allow_dynamic_shared(tf32_wgmma_gemm_kernel<4, 1>, bytes);
    tf32_wgmma_gemm_kernel<4, 1><<<grid, kThreads, bytes, current_stream()>>>(
        int(m), int(n), int(k), a, b, trans_a, trans_b, a_vectors, b_vectors, c, accumulate);
  } else if (!overlapped) {
    constexpr int bytes = bf16_shared_bytes<2, 0>();
    bf16_wgmma_gemm_kernel<2, 0><<<grid, kThreads, bytes, current_stream()>>>(
        int(m), int(n), int(k), a, b, trans_a, trans_b, a_vectors, b_vectors, c, accumulate);
  } else {
    constexpr int bytes = bf16_shared_bytes<3, 1>();
    allow_dynamic_shared(bf16_wgmma_gemm_kernel<3, 1>, bytes);
    bf16_wgmma_gemm_kernel<3, 1><<<grid, kThreads, bytes, current_stream()>>>(
        int(m), int(n), int(k), a, b, trans_a, trans_b, a_vectors, b_vectors, c, accumulate);
  }
  CUDA_CHECK_LAUNCH("matmul_wgmma_cuda (", tf32 ? "tf32" : "bf16", overlapped ? ", overlapped" : "",
                    ") m=", m, " n=", n, " k=", k, " trans_a=", trans_a, " trans_b=", trans_b);
}

void wgmma_m64nNk8_tf32_probe_cuda(int n, const float* a_image, const float* b_image,
                                   uint32_t a_leading_byte_offset, uint32_t a_stride_byte_offset,
                                   uint32_t b_leading_byte_offset, uint32_t b_stride_byte_offset,
                                   const float* c_registers, bool scale_d, float* d_registers) {
  launch_wgmma_probe<false>("wgmma_m64nNk8_tf32_probe_cuda", n, a_image, b_image,
                            a_leading_byte_offset, a_stride_byte_offset, b_leading_byte_offset,
                            b_stride_byte_offset, c_registers, scale_d, d_registers);
}

void wgmma_m64nNk16_bf16_probe_cuda(int n, const float* a_image, const float* b_image,
                                    uint32_t a_leading_byte_offset, uint32_t a_stride_byte_offset,
                                    uint32_t b_leading_byte_offset, uint32_t b_stride_byte_offset,
                                    const float* c_registers, bool scale_d, float* d_registers) {
  launch_wgmma_probe<true>("wgmma_m64nNk16_bf16_probe_cuda", n, a_image, b_image,
                           a_leading_byte_offset, a_stride_byte_offset, b_leading_byte_offset,
                           b_stride_byte_offset, c_registers, scale_d, d_registers);
}

}  // namespace engine::kernels
