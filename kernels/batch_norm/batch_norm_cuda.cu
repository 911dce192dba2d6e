// batch_norm with K branches, CUDA (math, layout and the routing table in batch_norm.h).
//
// Math:      per route r (rows [begin, end) -> branch k) and channel c, over the m = rows * HW
//            values of x[n, c, :]: mean, biased var, invstd = 1/sqrt(var + eps),
//            y = (x - mean) invstd w[k, c] + b[k, c]; running stats updated with the unbiased
//            var; backward dbias = sum dy, dweight = sum dy xhat and
//            dx = w invstd (dy - sum dy / m - xhat sum(dy xhat) / m)   (eval: dx = w invstd dy).
// Layout:    x, y, dy, dx contiguous [N, C, HW]; weight, bias, running stats, dweight, dbias
//            [K, C]; save_mean, save_invstd [num_routes, C]. The j-th value of (r, c), j in
//            [0, m), is x[((begin + j / HW) C + c) HW + j % HW]; threads walk j with a cursor
//            (n, s) advanced by a precomputed (dn, ds), so no division happens per element.
// Parallel:  every branch at once — the grid's x dimension enumerates the (route, channel)
//            pairs, so the number of launches does not depend on K:
//              forward train  2 launches: statistics (one 512-thread block per (r, c): Welford
//                             per thread, Chan's merge across the block; thread 0 writes
//                             save_mean/save_invstd and updates branch k's running stats) and
//                             apply (grid (r, c) x slices: y = (x - mean) invstd w + b);
//              forward eval   1 launch: apply, each block deriving mean/invstd from the running
//                             stats of its branch (block slice 0 also writes save_*);
//              backward       1-2 launches (+ a memset when some branch is unused): reduce
//                             (one block per (r, c): sum dy, sum dy xhat -> dbias, dweight) and
//                             apply (grid (r, c) x slices: dx). In training the dx pass reads its
//                             two sums back from dbias/dweight, so the CUDA twin needs both
//                             whenever it computes dx in training (engine/ops/batch_norm.cpp
//                             always passes them); without a workspace there is nowhere else
//                             to keep them.
//            The statistics and reduce kernels have only num_routes * C blocks: enough for
//            every layer of a ResNet except the 64-channel ones at large batch, where a split
//            reduction (partial Welford states + a finishing pass) is the next step.
// Numerics:  statistics by Welford in f32 per thread (count m / 512 values each), merged with
//            Chan et al.'s pairwise formula — one pass over x and no E[x^2] - E[x]^2
//            cancellation, so large-mean inputs keep their variance (tested against the CPU's
//            two-pass f64 reference). invstd and the running-stat update are computed once per
//            (r, c) in double, as the CPU does. Backward sums are plain f32 per thread, then a
//            tree: error grows like sqrt(m / 512) + log2(512) ulps.
// Cost:      forward train reads x twice (statistics, apply) and writes y: 12 bytes and ~7 FLOPs
//            per element; eval 8 bytes, ~3 FLOPs; backward reads dy and x twice and writes dx:
//            20 bytes, ~10 FLOPs. All memory bound: the floor is bytes / HBM bandwidth.
#include <cmath>
#include <cstdint>

#include "kernels/batch_norm/batch_norm.h"
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduction.cuh"

namespace engine::kernels {

namespace {

constexpr int kReduceThreads = 512;  // statistics and backward reduce: one block per (r, c)
constexpr int kApplyThreads = 256;   // elementwise passes
constexpr int64_t kApplyValuesPerThread = 4;
constexpr unsigned kMaxSlices = 65535;  // grid.y limit

// Walks the values j = first, first + step, ... of one (route, channel) without dividing per
// element: position (n, s) advances by step = dn * HW + ds.
struct RouteWalk {
  int64_t n, s, dn, ds, HW, C, c;
  __device__ RouteWalk(const BatchNormShape& shape, int r, int64_t c_, int64_t first, int64_t step)
      : n(shape.route_begin[r] + first / shape.HW),
        s(first % shape.HW),
        dn(step / shape.HW),
        ds(step % shape.HW),
        HW(shape.HW),
        C(shape.C),
        c(c_) {}
  __device__ int64_t index() const { return (n * C + c) * HW + s; }
  __device__ void advance() {
    s += ds;
    n += dn;
    if (s >= HW) {
      s -= HW;
      ++n;
    }
  }
};

__device__ int64_t route_values(const BatchNormShape& shape, int r) {
  return (shape.route_end[r] - shape.route_begin[r]) * shape.HW;
}

// ---- block reductions ----------------------------------------------------------------------

// Running (count, mean, M2) of a set of values; M2 = sum (x - mean)^2.
struct Welford {
  int64_t count = 0;
  float mean = 0.0f, m2 = 0.0f;

  __device__ void add(float v) {
    ++count;
    const float delta = v - mean;
    mean += delta / static_cast<float>(count);
    m2 += delta * (v - mean);
  }
  // Chan et al.: combine two disjoint sets.
  __device__ void merge(int64_t other_count, float other_mean, float other_m2) {
    if (other_count == 0) return;
    if (count == 0) {
      count = other_count;
      mean = other_mean;
      m2 = other_m2;
      return;
    }
    const int64_t total = count + other_count;
    const float delta = other_mean - mean;
    const float other_share = static_cast<float>(other_count) / static_cast<float>(total);
    mean += delta * other_share;
    m2 += other_m2 + delta * delta * static_cast<float>(count) * other_share;
    count = total;
  }
  __device__ void merge_from_lane(int offset) {
    const int64_t c = __shfl_down_sync(0xffffffffu, count, offset);
    const float mu = __shfl_down_sync(0xffffffffu, mean, offset);
    const float q = __shfl_down_sync(0xffffffffu, m2, offset);
    merge(c, mu, q);
  }
};

// Merges every thread's state into thread 0's (blockDim.x == kReduceThreads). The shape of
// block_reduce (kernels/common/reduction.cuh), written out because a state is three values merged
// by Chan's formula, and a shuffle moves one value.
__device__ Welford block_welford(Welford w) {
  constexpr int kWarps = kReduceThreads / 32;
  __shared__ int64_t counts[kWarps];
  __shared__ float means[kWarps], m2s[kWarps];
  for (int offset = 16; offset > 0; offset /= 2) w.merge_from_lane(offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    counts[warp] = w.count;
    means[warp] = w.mean;
    m2s[warp] = w.m2;
  }
  __syncthreads();
  Welford total;
  if (warp == 0) {
    if (lane < kWarps) total.merge(counts[lane], means[lane], m2s[lane]);
    for (int offset = 16; offset > 0; offset /= 2) total.merge_from_lane(offset);
  }
  return total;  // meaningful in thread 0
}

// ---- kernels -------------------------------------------------------------------------------

// One block per (route, channel): batch statistics, save_*, running-stat update.
__global__ void batch_norm_stats_kernel(BatchNormShape shape, const float* x, float momentum,
                                        float eps, float* save_mean, float* save_invstd,
                                        float* running_mean, float* running_var) {
  const int r = static_cast<int>(blockIdx.x / shape.C);
  const int64_t c = blockIdx.x % shape.C;
  const int64_t m = route_values(shape, r);
  Welford w;
  RouteWalk walk(shape, r, c, threadIdx.x, blockDim.x);
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x, walk.advance()) w.add(x[walk.index()]);
  w = block_welford(w);
  if (threadIdx.x != 0) return;

  const double mean = w.mean;
  const double var = static_cast<double>(w.m2) / static_cast<double>(m);  // biased
  const int64_t rc = r * shape.C + c;
  save_mean[rc] = w.mean;
  save_invstd[rc] = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
  // Each branch appears in at most one route (checked by the engine), so no two blocks write
  // the same running-stat entry.
  const int64_t p = shape.route_branch[r] * shape.C + c;
  const double mom = momentum;
  const double count = static_cast<double>(m);
  running_mean[p] = static_cast<float>((1.0 - mom) * running_mean[p] + mom * mean);
  running_var[p] =
      static_cast<float>((1.0 - mom) * running_var[p] + mom * var * count / (count - 1.0));
}

// grid (num_routes * C, slices): y = (x - mean) invstd w + b over the block's share of (r, c).
// Training passes running_mean = running_var = null and reads the batch statistics from
// save_mean/save_invstd; eval passes the running stats, from which every block derives the same
// mean/invstd (as the CPU does, in double) and slice 0 records them in save_mean/save_invstd.
__global__ void batch_norm_apply_kernel(BatchNormShape shape, const float* x, const float* weight,
                                        const float* bias, const float* running_mean,
                                        const float* running_var, float eps, float* y,
                                        float* save_mean, float* save_invstd) {
  const int r = static_cast<int>(blockIdx.x / shape.C);
  const int64_t c = blockIdx.x % shape.C;
  const int64_t rc = r * shape.C + c;
  const int64_t p = shape.route_branch[r] * shape.C + c;
  float mean, invstd;
  if (running_mean != nullptr) {
    mean = running_mean[p];
    invstd = static_cast<float>(
        1.0 / sqrt(static_cast<double>(running_var[p]) + static_cast<double>(eps)));
    if (blockIdx.y == 0 && threadIdx.x == 0) {
      save_mean[rc] = mean;
      save_invstd[rc] = invstd;
    }
  } else {
    mean = save_mean[rc];
    invstd = save_invstd[rc];
  }
  const float scale = invstd * weight[p];
  const float shift = bias[p];
  const int64_t m = route_values(shape, r);
  const int64_t first = blockIdx.y * int64_t(blockDim.x) + threadIdx.x;
  const int64_t step = int64_t(gridDim.y) * blockDim.x;
  RouteWalk walk(shape, r, c, first, step);
  for (int64_t j = first; j < m; j += step, walk.advance()) {
    const int64_t i = walk.index();
    y[i] = (x[i] - mean) * scale + shift;
  }
}

// One block per (route, channel): dbias = sum dy, dweight = sum dy xhat (either may be null).
__global__ void batch_norm_backward_reduce_kernel(BatchNormShape shape, const float* dy,
                                                  const float* x, const float* save_mean,
                                                  const float* save_invstd, float* dweight,
                                                  float* dbias) {
  const int r = static_cast<int>(blockIdx.x / shape.C);
  const int64_t c = blockIdx.x % shape.C;
  const int64_t rc = r * shape.C + c;
  const float mean = save_mean[rc], invstd = save_invstd[rc];
  const int64_t m = route_values(shape, r);
  float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
  RouteWalk walk(shape, r, c, threadIdx.x, blockDim.x);
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x, walk.advance()) {
    const int64_t i = walk.index();
    sum_dy += dy[i];
    sum_dy_xhat += dy[i] * ((x[i] - mean) * invstd);
  }
  __shared__ float scratch[kWarpSize];
  sum_dy = block_sum(sum_dy, scratch);
  sum_dy_xhat = block_sum(sum_dy_xhat, scratch);
  if (threadIdx.x != 0) return;
  const int64_t p = shape.route_branch[r] * shape.C + c;
  if (dweight != nullptr) dweight[p] = sum_dy_xhat;
  if (dbias != nullptr) dbias[p] = sum_dy;
}

// grid (num_routes * C, slices): dx. Training reads sum dy from dbias and sum dy xhat from
// dweight (written by the reduce kernel just before, on the same stream).
__global__ void batch_norm_backward_apply_kernel(BatchNormShape shape, bool training,
                                                 const float* dy, const float* x,
                                                 const float* weight, const float* save_mean,
                                                 const float* save_invstd, const float* sum_dy_xhat,
                                                 const float* sum_dy, float* dx) {
  const int r = static_cast<int>(blockIdx.x / shape.C);
  const int64_t c = blockIdx.x % shape.C;
  const int64_t rc = r * shape.C + c;
  const int64_t p = shape.route_branch[r] * shape.C + c;
  const float mean = save_mean[rc], invstd = save_invstd[rc];
  const float scale = weight[p] * invstd;
  const int64_t m = route_values(shape, r);
  // Eval: the statistics are constants, so both mean terms vanish.
  const float mean_dy = training ? sum_dy[p] / static_cast<float>(m) : 0.0f;
  const float mean_dy_xhat = training ? sum_dy_xhat[p] / static_cast<float>(m) : 0.0f;
  const int64_t first = blockIdx.y * int64_t(blockDim.x) + threadIdx.x;
  const int64_t step = int64_t(gridDim.y) * blockDim.x;
  RouteWalk walk(shape, r, c, first, step);
  for (int64_t j = first; j < m; j += step, walk.advance()) {
    const int64_t i = walk.index();
    const float xhat = (x[i] - mean) * invstd;
    dx[i] = scale * (dy[i] - mean_dy - xhat * mean_dy_xhat);
  }
}

// ---- launch helpers ------------------------------------------------------------------------

int64_t largest_route(const BatchNormShape& shape) {
  int64_t largest = 0;
  for (int r = 0; r < shape.num_routes; ++r) {
    const int64_t m = (shape.route_end[r] - shape.route_begin[r]) * shape.HW;
    if (m > largest) largest = m;
  }
  return largest;
}

// Grid of the elementwise passes: x = (r, c) pairs, y = slices of ~4 values per thread of the
// largest route (shorter routes leave some threads idle). Small routes (batch_norm1d: m = N)
// get smaller blocks rather than mostly idle 256-thread ones.
struct ApplyGrid {
  dim3 grid, block;
};

ApplyGrid apply_grid(const BatchNormShape& shape) {
  const int64_t m = largest_route(shape);
  int64_t threads = kApplyThreads;
  if (m < threads) threads = ceil_div(m > 0 ? m : 1, 32) * 32;
  int64_t slices = ceil_div(m, threads * kApplyValuesPerThread);
  if (slices < 1) slices = 1;
  if (slices > kMaxSlices) slices = kMaxSlices;
  ApplyGrid g;
  g.grid = dim3(static_cast<unsigned>(shape.num_routes * shape.C), static_cast<unsigned>(slices));
  g.block = dim3(static_cast<unsigned>(threads));
  return g;
}

unsigned route_channel_blocks(const BatchNormShape& shape) {
  return static_cast<unsigned>(shape.num_routes * shape.C);
}

}  // namespace

void batch_norm_forward_train_cuda(const BatchNormShape& shape, const float* x, const float* weight,
                                   const float* bias, float momentum, float eps, float* y,
                                   float* save_mean, float* save_invstd, float* running_mean,
                                   float* running_var) {
  if (shape.C == 0 || shape.num_routes == 0) return;
  cudaStream_t stream = current_stream();
  batch_norm_stats_kernel<<<route_channel_blocks(shape), kReduceThreads, 0, stream>>>(
      shape, x, momentum, eps, save_mean, save_invstd, running_mean, running_var);
  CUDA_CHECK_LAUNCH("batch_norm_forward_train_cuda statistics N=", shape.N, " C=", shape.C,
                    " HW=", shape.HW, " routes=", shape.num_routes, " K=", shape.K);
  const ApplyGrid g = apply_grid(shape);
  batch_norm_apply_kernel<<<g.grid, g.block, 0, stream>>>(shape, x, weight, bias, nullptr, nullptr,
                                                          eps, y, save_mean, save_invstd);
  CUDA_CHECK_LAUNCH("batch_norm_forward_train_cuda normalize N=", shape.N, " C=", shape.C,
                    " HW=", shape.HW, " routes=", shape.num_routes, " K=", shape.K);
}

void batch_norm_forward_eval_cuda(const BatchNormShape& shape, const float* x, const float* weight,
                                  const float* bias, const float* running_mean,
                                  const float* running_var, float eps, float* y, float* save_mean,
                                  float* save_invstd) {
  if (shape.C == 0 || shape.num_routes == 0) return;
  const ApplyGrid g = apply_grid(shape);
  batch_norm_apply_kernel<<<g.grid, g.block, 0, current_stream()>>>(
      shape, x, weight, bias, running_mean, running_var, eps, y, save_mean, save_invstd);
  CUDA_CHECK_LAUNCH("batch_norm_forward_eval_cuda N=", shape.N, " C=", shape.C, " HW=", shape.HW,
                    " routes=", shape.num_routes, " K=", shape.K);
}

void batch_norm_backward_cuda(const BatchNormShape& shape, bool training, const float* dy,
                              const float* x, const float* weight, const float* save_mean,
                              const float* save_invstd, float* dx, float* dweight, float* dbias) {
  ENGINE_CHECK(!(training && dx != nullptr) || (dweight != nullptr && dbias != nullptr),
               "batch_norm_backward_cuda: computing dx in training mode needs dweight and dbias "
               "(they hold the per-channel sums the dx pass reads); N=",
               shape.N, " C=", shape.C, " HW=", shape.HW);
  cudaStream_t stream = current_stream();
  if (dweight != nullptr || dbias != nullptr) {
    // Branches no route uses get zero gradients; the used rows are overwritten below.
    if (shape.num_routes < shape.K) {
      const size_t bytes = static_cast<size_t>(shape.K * shape.C) * sizeof(float);
      if (dweight != nullptr) {
        CUDA_CHECK(cudaMemsetAsync(dweight, 0, bytes, stream),
                   "batch_norm_backward_cuda zeroing dweight K=", shape.K, " C=", shape.C);
      }
      if (dbias != nullptr) {
        CUDA_CHECK(cudaMemsetAsync(dbias, 0, bytes, stream),
                   "batch_norm_backward_cuda zeroing dbias K=", shape.K, " C=", shape.C);
      }
    }
    if (shape.C > 0 && shape.num_routes > 0) {
      batch_norm_backward_reduce_kernel<<<route_channel_blocks(shape), kReduceThreads, 0, stream>>>(
          shape, dy, x, save_mean, save_invstd, dweight, dbias);
      CUDA_CHECK_LAUNCH("batch_norm_backward_cuda reduce N=", shape.N, " C=", shape.C,
                        " HW=", shape.HW, " routes=", shape.num_routes, " K=", shape.K);
    }
  }
  if (dx == nullptr || shape.C == 0 || shape.num_routes == 0) return;
  const ApplyGrid g = apply_grid(shape);
  batch_norm_backward_apply_kernel<<<g.grid, g.block, 0, stream>>>(
      shape, training, dy, x, weight, save_mean, save_invstd, dweight, dbias, dx);
  CUDA_CHECK_LAUNCH("batch_norm_backward_cuda dx N=", shape.N, " C=", shape.C, " HW=", shape.HW,
                    " routes=", shape.num_routes, " K=", shape.K, " training=", training);
}

}  // namespace engine::kernels
