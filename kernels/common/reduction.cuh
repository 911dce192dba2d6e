// Warp and block reductions shared by the CUDA kernels: one butterfly, one block scheme, so every
// kernel that sums (or takes a max) across threads adds in the same, fixed order.
//
// Warp: lane l combines its value with lane l ^ offset's for offset = 16, 8, 4, 2, 1 (shuffles,
//   no shared memory); every lane ends with the same result, from the same expression tree.
// Block (1-D, blockDim.x a multiple of 32, at most 1024): each warp reduces its values, lane 0 of
//   warp w writes scratch[w], and every warp then reduces scratch[0 .. warps) (lanes past the last
//   warp contribute `identity`), so every thread gets the result. The leading __syncthreads lets a
//   kernel call this back to back with the same scratch: the readers of the previous result are
//   done before it is overwritten.
//
// `combine` says how two partial results meet: SumOp, MaxOp or MinOp below, or a kernel's own
// (softmax passes a max that propagates NaN). Integer sums and maxima are exact in any order;
// floating-point ones are deterministic because the tree is fixed.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/launch.cuh"

namespace engine::kernels {

constexpr int kWarpSize = 32;
constexpr unsigned kFullWarpMask = 0xffffffffu;

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

// fmax / fmin: a NaN loses to a number. Unsigned integers (bit patterns) compare as such.
struct MaxOp {
  __device__ double operator()(double a, double b) const { return fmax(a, b); }
  __device__ unsigned operator()(unsigned a, unsigned b) const { return b > a ? b : a; }
};

struct MinOp {
  __device__ double operator()(double a, double b) const { return fmin(a, b); }
};

template <typename T, typename Combine>
__device__ inline T warp_reduce(T v, Combine combine) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    v = combine(v, __shfl_xor_sync(kFullWarpMask, v, offset));
  }
  return v;
}

template <typename T>
__device__ inline T warp_sum(T v) {
  return warp_reduce(v, SumOp{});
}

// `scratch`: at least blockDim.x / 32 values of shared memory (32 always suffice).
template <typename T, typename Combine>
__device__ inline T block_reduce(T v, T identity, T* scratch, Combine combine) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warp_reduce(v, combine);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_reduce(lane < warps ? scratch[lane] : identity, combine);
}

template <typename T>
__device__ inline T block_sum(T v, T* scratch) {
  return block_reduce(v, T(0), scratch, SumOp{});
}

// Threads for a block that reduces one row of `length` values with block_reduce: a multiple of 32,
// no more than the row needs, at most 256.
inline int row_block_threads(int64_t length) {
  constexpr int kMaxThreads = 256;
  if (length >= kMaxThreads) return kMaxThreads;
  return static_cast<int>(ceil_div(length < 1 ? 1 : length, kWarpSize) * kWarpSize);
}

}  // namespace engine::kernels
