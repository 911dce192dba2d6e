// The fused PGD step, CUDA.
// Math:      x_new = clamp(x0 + clip(x - alpha sign(g) - x0, -eps, eps), 0, 1), elementwise, and
//            max_delta = max |x_new - x0| (pgd_step.h; sign(0) = 0, NaN propagates).
// Layout:    contiguous f32 arrays of n elements; max_delta is one f32 in device memory.
// Parallel:  one kernel. A grid-stride loop (256 threads per block, at most kMaxBlocks blocks)
//            reads x, x0, g once and writes x_new once per element, as float4 when all four
//            pointers are 16-byte aligned (a scalar loop takes the remainder). Each thread keeps
//            its running max of |x_new - x0|; the block reduces it (kernels/common/reduction.cuh)
//            and one thread per block does atomicMax on the float's bit pattern. That is valid
//            because the values are >= 0 (|.| clears the sign bit), and for non-negative IEEE
//            floats the unsigned bit patterns order exactly like the values; NaN (0x7fc...) sorts
//            above +inf (0x7f800000), so a NaN delta survives the max. max_delta is zeroed by
//            cudaMemsetAsync on the same stream first: no host synchronization anywhere. Capping
//            the grid bounds the number of same-address atomics (<= kMaxBlocks), which would
//            otherwise serialize in L2 for a large batch.
// Cost:      ~8 FLOPs and 16 bytes per element (3 reads + 1 write): the floor is 16 n / HBM
//            bandwidth, i.e. 2x a device-to-device copy of x (8 n) — the ratio `dml bench` reports.
// Exactness: alpha * sign(g) is computed with __fmul_rn and the rest with __fadd_rn/__fsub_rn,
//            so nvcc cannot contract anything into an FMA: every operation rounds exactly as in
//            the f32 CPU reference, and the results are bit-identical.
#include <cstdint>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduction.cuh"
#include "kernels/pgd_step/pgd_step.h"

namespace engine::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 2048;  // ~2 waves of 256-thread blocks on an H100 (132 SMs)

__device__ __forceinline__ float sign_of(float v) {
  if (v > 0.0f) return 1.0f;
  if (v < 0.0f) return -1.0f;
  return v == 0.0f ? 0.0f : v;  // -0 -> +0 exactly as the CPU reference; NaN -> NaN
}

__device__ __forceinline__ float clip(float v, float low, float high) {
  if (v < low) return low;
  if (v > high) return high;
  return v;  // NaN passes
}

// One element: writes nothing, returns x_new; `largest` receives the bit pattern max.
__device__ __forceinline__ float step_one(float x, float x0, float g, float alpha, float eps,
                                          unsigned& largest) {
  const float stepped = __fsub_rn(x, __fmul_rn(alpha, sign_of(g)));
  const float d = clip(__fsub_rn(stepped, x0), -eps, eps);
  const float out = clip(__fadd_rn(x0, d), 0.0f, 1.0f);
  const unsigned bits = __float_as_uint(fabsf(__fsub_rn(out, x0)));
  largest = bits > largest ? bits : largest;
  return out;
}

__global__ void pgd_step_kernel(int64_t n, int64_t n_vec, const float* x, const float* x0,
                                const float* g, float alpha, float eps, float* x_new,
                                unsigned* max_delta_bits) {
  unsigned largest = 0;  // the bits of +0.0f
  const int64_t first = grid_thread_index(), stride = grid_thread_count();

  // Vector part: elements [0, 4 n_vec), four per thread per iteration.
  const float4* x4 = reinterpret_cast<const float4*>(x);
  const float4* x04 = reinterpret_cast<const float4*>(x0);
  const float4* g4 = reinterpret_cast<const float4*>(g);
  float4* out4 = reinterpret_cast<float4*>(x_new);
  for (int64_t i = first; i < n_vec; i += stride) {
    const float4 a = x4[i], b = x04[i], s = g4[i];
    float4 o;
    o.x = step_one(a.x, b.x, s.x, alpha, eps, largest);
    o.y = step_one(a.y, b.y, s.y, alpha, eps, largest);
    o.z = step_one(a.z, b.z, s.z, alpha, eps, largest);
    o.w = step_one(a.w, b.w, s.w, alpha, eps, largest);
    out4[i] = o;
  }
  // Scalar remainder (everything when the pointers are not 16-byte aligned).
  for (int64_t i = 4 * n_vec + first; i < n; i += stride) {
    x_new[i] = step_one(x[i], x0[i], g[i], alpha, eps, largest);
  }

  if (max_delta_bits == nullptr) return;  // uniform across the grid: no divergent barrier
  __shared__ unsigned scratch[kThreads / kWarpSize];
  const unsigned block_max = block_reduce(largest, 0u, scratch, MaxOp{});
  if (threadIdx.x == 0) atomicMax(max_delta_bits, block_max);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void pgd_step_cuda(int64_t n, const float* x, const float* x0, const float* grad, float alpha,
                   float eps, float* x_new, float* max_delta) {
  cudaStream_t stream = current_stream();
  if (max_delta != nullptr) {
    CUDA_CHECK(cudaMemsetAsync(max_delta, 0, sizeof(float), stream), "pgd_step_cuda n=", n,
               ": zeroing max_delta");
  }
  if (n == 0) return;
  const bool vector = aligned16(x) && aligned16(x0) && aligned16(grad) && aligned16(x_new);
  const int64_t n_vec = vector ? n / 4 : 0;
  int64_t blocks = ceil_div(vector ? n_vec + (n - 4 * n_vec) : n, kThreads);
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  describe_next_launch({"pgd_step", -1.0, 16.0 * double(n)});  // x, x0, grad read; x_new written
  pgd_step_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      n, n_vec, x, x0, grad, alpha, eps, x_new, reinterpret_cast<unsigned*>(max_delta));
  CUDA_CHECK_LAUNCH("pgd_step_cuda n=", n, " alpha=", alpha, " eps=", eps);
}

}  // namespace engine::kernels
