// The CUDA emulator's C++ for the PTX instructions that kernels/common/mma_sync.cuh wraps in
// inline assembly on a GPU: the warp-level matrix multiply-accumulate mma.sync (TF32 m16n8k8), the
// TF32 conversion cvt.rna.tf32.f32, the BF16 m16n8k16 mma.sync with its packing conversion
// cvt.rn.bf16x2.f32, and the asynchronous copy cp.async with its commit and wait.
//
// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 d, a, b, c computes D = A B + C for A 16 x 8,
// B 8 x 8, C and D 16 x 8, spread over the 32 lanes of a warp in registers. Unlike WMMA's opaque
// fragments (the emulator's <mma.h> scrambles those on purpose), the PTX ISA documents this layout
// ("Matrix Fragments for mma.m16n8k8", .tf32), and kernels written on mma.sync depend on it, so it
// is followed exactly here. With groupID = lane >> 2 and threadID_in_group = lane % 4 (g, t):
//   A (row, col):  a0 (g, t)    a1 (g + 8, t)    a2 (g, t + 4)    a3 (g + 8, t + 4)
//   B (row, col):  b0 (t, g)    b1 (t + 4, g)
//   C, D:          c0 (g, 2t)   c1 (g, 2t + 1)   c2 (g + 8, 2t)   c3 (g + 8, 2t + 1)
// A and B registers hold TF32 bit patterns (.b32); an operand with any of its low 13 bits set was
// not converted (cvt.rna) and fails the launch, as the emulator's WMMA does. The sum is
// D[r][c] = C[r][c] + A[r][0] B[0][c] + ... + A[r][7] B[7][c] in FP32, one rounding per add, in
// ascending k; a product of two TF32 values is exact in FP32. A GPU's tensor core may add in
// another order inside one instruction, so tests bound the error instead of comparing bits. The
// instruction is warp-collective: every lane's registers are gathered between two warp barriers
// (emu::warp_collective_begin / _end), and a missing lane fails the launch.
//
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: A 16 x 16 and B 16 x 8 in BF16, two
// elements adjacent along k per .b32 register, the lower k in the low 16 bits ("Matrix Fragments
// for mma.m16n8k16 with floating point type"):
//   A:  a0 (g, 2t | 2t + 1)   a1 (g + 8, 2t | 2t + 1)   a2 (g, 2t + 8 | 2t + 9)   a3 (g + 8, ...)
//   B:  b0 (2t | 2t + 1, g)   b1 (2t + 8 | 2t + 9, g)
//   C, D as above. Every 16-bit pattern is a BF16, so there is nothing to check; a product of two
//   BF16 values is exact in FP32, the 16 adds round as for TF32.
//
// cp.async.{ca,cg}.shared.global [dst], [src], bytes, src_bytes copies `bytes` (4, 8 or 16; cg
// only 16) from global to shared memory, reading src_bytes of them and zero-filling the rest. It
// is asynchronous: the data are in shared memory only after the thread's cp.async.wait_group N
// for a later commit (cp.async.commit_group), and other threads see them only after a barrier
// beyond that. The emulator makes that visible: at issue the destination is overwritten with 0xFF
// bytes (NaN floats, as fresh shared memory) and the copy is queued for the thread
// (emu::async_copy_issue); the bytes arrive when the thread waits for the copy's group. So a kernel
// that reads a stage before waiting for it reads NaN here, and the race checker sees the
// destination written at issue (by the poison) and at the wait (by the data), which is when a
// GPU's copy may land. Pointers must be aligned to `bytes` and the source must be device memory,
// else the launch fails, as a GPU's misaligned address would.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstddef>
#include <cstdint>

namespace emu::ptx {

// cvt.rna.tf32.f32 as a .b32 register: the emulator's WMMA conversion (round to nearest, ties away
// from zero), one definition for both.
inline uint32_t float_to_tf32(float value) {
  return __float_as_uint(nvcuda::wmma::__float_to_tf32(value));
}

// One lane's A and B registers, as the warp-collective instructions post them.
struct LaneRegisters {
  const uint32_t* a;
  const uint32_t* b;
};

// Posts this lane's registers (`mine`, which must live until finish_mma) and returns every lane's,
// between the warp barriers of emu::warp_collective_begin; a lane missing fails the launch.
inline void gather_lane_registers(const LaneRegisters& mine,
                                  const LaneRegisters* (&lanes)[warpSize]) {
  uint64_t posted[warpSize];
  warp_collective_begin(reinterpret_cast<uint64_t>(&mine), posted);
  for (int lane = 0; lane < warpSize; ++lane) {
    if (posted[lane] == kAbsentLane) fault("mma.sync: not every lane of the warp executed it");
    lanes[lane] = reinterpret_cast<const LaneRegisters*>(posted[lane]);
  }
}

// This lane's d = A B + C for the gathered A (16 x K) and B (K x 8): d[i] is D(g + 8 (i / 2),
// 2t + i % 2), summed in FP32 in ascending k; then the collective's closing barrier.
template <int K>
void finish_mma(float (&d)[4], const float (&c)[4], const float (&matrix_a)[16][K],
                const float (&matrix_b)[K][8]) {
  const int g = lane_id() >> 2, t = lane_id() % 4;
  float result[4];
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
    float sum = c[i];
    for (int p = 0; p < K; ++p) sum += matrix_a[row][p] * matrix_b[p][col];
    result[i] = sum;
  }
  warp_collective_end();
  for (int i = 0; i < 4; ++i) d[i] = result[i];  // after every lane's reads: d may be c
}

// A TF32 register as the float it holds; not TF32 (any of the low 13 bits set) fails the launch.
inline float tf32_register(uint32_t bits, const char* operand) {
  if (bits & 0x1fffu) fault(operand);
  return __uint_as_float(bits);
}

inline void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                             const float (&c)[4]) {
  const LaneRegisters mine{a, b};
  const LaneRegisters* lanes[warpSize];
  gather_lane_registers(mine, lanes);
  const char* not_a = "mma.sync: an A register is not TF32 (cvt.rna)";
  const char* not_b = "mma.sync: a B register is not TF32 (cvt.rna)";
  float matrix_a[16][8], matrix_b[8][8];
  for (int lane = 0; lane < warpSize; ++lane) {
    const int g = lane >> 2, t = lane % 4;
    matrix_a[g][t] = tf32_register(lanes[lane]->a[0], not_a);
    matrix_a[g + 8][t] = tf32_register(lanes[lane]->a[1], not_a);
    matrix_a[g][t + 4] = tf32_register(lanes[lane]->a[2], not_a);
    matrix_a[g + 8][t + 4] = tf32_register(lanes[lane]->a[3], not_a);
    matrix_b[t][g] = tf32_register(lanes[lane]->b[0], not_b);
    matrix_b[t + 4][g] = tf32_register(lanes[lane]->b[1], not_b);
  }
  finish_mma(d, c, matrix_a, matrix_b);
}

// cvt.rn.bf16x2.f32 with `low` in bits 0-15: the emulator's BF16 rounding (<cuda_bf16.h>, to
// nearest, ties to even).
inline uint32_t pack_bf16x2(float low, float high) {
  return uint32_t(__float2bfloat16(low).bits) | uint32_t(__float2bfloat16(high).bits) << 16;
}

inline float bf16_bits_to_float(uint32_t bits16) { return __uint_as_float(bits16 << 16); }

inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                              const float (&c)[4]) {
  const LaneRegisters mine{a, b};
  const LaneRegisters* lanes[warpSize];
  gather_lane_registers(mine, lanes);
  float matrix_a[16][16], matrix_b[16][8];
  for (int lane = 0; lane < warpSize; ++lane) {
    const int g = lane >> 2, t = lane % 4;
    // a_r: row g (+ 8 for odd r), columns 2t and 2t + 1 (+ 8 for r >= 2), the lower in bits 0-15
    for (int r = 0; r < 4; ++r) {
      const int row = g + 8 * (r % 2), col = 2 * t + 8 * (r / 2);
      matrix_a[row][col] = bf16_bits_to_float(lanes[lane]->a[r] & 0xffffu);
      matrix_a[row][col + 1] = bf16_bits_to_float(lanes[lane]->a[r] >> 16);
    }
    // b_r: rows 2t and 2t + 1 (+ 8 for r = 1), column g
    for (int r = 0; r < 2; ++r) {
      const int row = 2 * t + 8 * r;
      matrix_b[row][g] = bf16_bits_to_float(lanes[lane]->b[r] & 0xffffu);
      matrix_b[row + 1][g] = bf16_bits_to_float(lanes[lane]->b[r] >> 16);
    }
  }
  finish_mma(d, c, matrix_a, matrix_b);
}

inline void cp_async(void* shared_destination, const void* global_source, std::size_t bytes,
                     std::size_t source_bytes) {
  if (reinterpret_cast<uintptr_t>(shared_destination) % bytes != 0 ||
      reinterpret_cast<uintptr_t>(global_source) % bytes != 0) {
    fault("cp.async: an address is not aligned to the copy's size");
  }
  if (source_bytes > bytes) fault("cp.async: src-size larger than the copy");
  if (source_bytes > 0 && !is_device_pointer_or_null(global_source)) {
    fault("cp.async: the source is not device memory");
  }
  unsigned char* destination = static_cast<unsigned char*>(shared_destination);
  for (std::size_t i = 0; i < bytes; ++i) destination[i] = 0xFF;  // undefined until the wait
  async_copy_issue(AsyncCopy{shared_destination, global_source, bytes, source_bytes});
}

inline void cp_async_commit() { async_copy_commit(); }

inline void cp_async_wait(int pending) {
  AsyncCopy copy;
  while (async_copy_take_completed(pending, &copy)) {
    unsigned char* destination = static_cast<unsigned char*>(copy.shared_destination);
    const unsigned char* source = static_cast<const unsigned char*>(copy.global_source);
    for (std::size_t i = 0; i < copy.bytes; ++i) {
      destination[i] = i < copy.source_bytes ? source[i] : 0;
    }
  }
}

}  // namespace emu::ptx
