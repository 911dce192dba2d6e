// Fused SPC-2 triplet loss, CUDA, f32 in and out (math and contract: triplet.h; the oracle is
// fused_triplet_cpu). Four launches on the current stream, no host synchronization; the
// workspace is stream-ordered (cudaMallocAsync / cudaFreeAsync).
//
// Math: normalize, B x B mining distances, mining (losses/miners.h rules), hinge loss and its
//   gradient with respect to the raw rows (triplet.h steps 1-6).
// Layout: x, grad [B, D] row-major; labels [B] i64; anchor, positive, negative [P] i64 and
//   hardness [P] f32, P = B / 2; loss one f32. Workspace: y [B, D] f32 (N, C), |x| [B] f32,
//   |y| [B] f64, mining distances [B, B] f32, per triplet hinge and two gradient coefficients f64.
// Parallelization and why:
//   1. normalize_rows_kernel: one thread per row. It sums |x|^2 and |y|^2 sequentially in f64 in
//      ascending k, the order of the CPU kernels, so |x| (rounded to f32), y and |y| are the
//      CPU's bits (B D <= 1024 x D floats: a few microseconds even serial per row).
//   2. mining_distance_kernel: 32 x 32 output tiles, 256 threads, 4 pairs per thread; rows staged
//      in shared memory in chunks of 32 columns. Each pair is summed in f64 in ascending k with
//      fma, then rounded to f32. The CPU twin also sums in f64 (pairwise_distance's fast path,
//      in its SIMD lanes' order, not ascending k), so the two f32 distances are the same bits
//      unless the f64 sums straddle an f32 rounding boundary (they differ by ~1e-16 relative;
//      f32's spacing is 6e-8: about one pair in 10^8), and the discrete mining decisions agree.
//   3. mine_kernel: one warp per anchor (4 per block). The warp walks the anchor's row of B
//      distances 32 at a time: counts of candidates by __ballot_sync / __popc, "the k-th
//      candidate in index order" (a uniform pick) by walking the ballots, min / max / argmin
//      by shuffles, the distance-weighted inverse CDF by a warp inclusive scan. All comparisons
//      are those of the CPU twin in f64 on the same f32 distances (squares of f32 values are exact
//      in f64, so d^2 < d'^2 never depends on rounding). Only the distance-weighted sums are
//      added in another order than the CPU's (scan tree vs left to right), from weights whose
//      log/exp (CUDA's, not glibc's: an ulp apart) nvcc may also contract into FMAs: a
//      different pick would need u * total within ~1e-13 relative of a cumulative boundary. Then
//      the warp computes the two loss distances over D (lanes stride k, shuffle sum) and stores the
//      hinge and the two gradient coefficients of its triplet.
//   4. loss_gradient_kernel: block 0 sums the P hinges in index order (the loss). One block per
//      row r (128 threads) gathers -- no atomics, deterministic -- the triplets r takes part in
//      (warp 0 builds the list in ascending triplet order with ballots), then threads stride k:
//      each recomputes its g_k from the list, block sums give <z, g> for the normalization
//      backwards (one for N, two for C), and a last pass writes grad. Recomputing g_k per pass
//      avoids a [B, D] f64 buffer; a row appears in ~3 triplets on average.
// Cost (B = 2P rows of D): FLOPs ~3 B^2 D in f64 for the distances (dominant; 5e8 for B = 1024,
//   D = 512: ~20 us of the H100's f64 FMA rate), ~10 P D for the loss, ~10 B D per gradient pass;
//   bytes: read x (4 B D) about 3 times (the normalize thread, the tile stages, the gradient
//   passes from L2), write grad (4 B D), the [B, B] matrix 4 B^2 written once and read by the
//   miners (L2-resident). The floor is 8 B D bytes / bandwidth plus the f64 distance FLOPs.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/cuda_workspace.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduction.cuh"
#include "kernels/random/philox.h"
#include "kernels/triplet/triplet.h"
#include "kernels/triplet/triplet_mining.cuh"

namespace engine::kernels {
namespace {

// The mining rules (triplet_mining.cuh).
using namespace triplet_mining;

constexpr double kNormEps = 1e-12;        // engine::l2_normalize's default eps
constexpr double kCosineEps = 1e-12;      // engine::pairwise_distance's cosine norm clamp
constexpr double kRowDistanceEps = 1e-6;  // PyTorch's pairwise_distance: |a - b + 1e-6|
constexpr int kRowsPerNormalizeBlock = 128;
constexpr int kDistanceTile = 32;   // output tile side
constexpr int kDistanceChunk = 32;  // columns of D staged per step
constexpr int kDistanceThreads = 256;
constexpr int kDistanceRowsPerThread = kDistanceTile * kDistanceTile / kDistanceThreads;  // 4
constexpr int kAnchorsPerBlock = 4;  // one warp each
constexpr int kGradientThreads = 128;
constexpr int kMaxTriplets = static_cast<int>(kFusedTripletMaxBatch / 2);

// Roles a row plays in one triplet (bit set).
constexpr int kRoleAnchor = 1, kRolePositive = 2, kRoleNegative = 4;

// ---- helpers ---------------------------------------------------------------------------------

// Element e of the Philox uniform stream at (seed, offset), as engine::uniform lays it out.
__device__ inline double stream_uniform(uint64_t seed, uint64_t offset, int64_t e) {
  const PhiloxBlock block = philox4x32_10(offset + uint64_t(e) / 4, 0, seed);
  return static_cast<double>(philox_uniform01(block.word[e % 4]));
}

// ---- 1. normalize ----------------------------------------------------------------------------

__global__ void normalize_rows_kernel(const float* x, int B, int64_t D, bool normalizes, float* y,
                                      float* x_norm, double* y_norm) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= B) return;
  const float* row = x + r * D;
  const float* out = row;
  if (normalizes) {
    double squares = 0.0;
    for (int64_t k = 0; k < D; ++k) squares = fma(double(row[k]), double(row[k]), squares);
    const float norm = static_cast<float>(sqrt(squares));
    const float divisor = fmaxf(norm, static_cast<float>(kNormEps));
    float* y_row = y + r * D;
    for (int64_t k = 0; k < D; ++k) y_row[k] = row[k] / divisor;
    x_norm[r] = norm;
    out = y_row;
  }
  double squares = 0.0;
  for (int64_t k = 0; k < D; ++k) squares = fma(double(out[k]), double(out[k]), squares);
  y_norm[r] = sqrt(squares);
}

// ---- 2. mining distances ---------------------------------------------------------------------

using DistanceStage = float[kDistanceChunk][kDistanceTile + 1];  // [k][row]; +1: no bank conflicts

// stage[k][r] = y[row0 + r][k0 + k] (0 outside). Element e: r = e / 32, k = e % 32, so a warp
// reads 32 consecutive floats of one row.
__device__ inline void stage_rows(const float* y, int B, int64_t D, int row0, int64_t k0,
                                  DistanceStage& stage) {
  for (int e = threadIdx.x; e < kDistanceTile * kDistanceChunk; e += kDistanceThreads) {
    const int r = e / kDistanceChunk, k = e % kDistanceChunk;
    const int row = row0 + r;
    const int64_t col = k0 + k;
    stage[k][r] = (row < B && col < D) ? y[row * D + col] : 0.0f;
  }
}

// Thread (tx, ty) = (tid % 32, tid / 32) owns pairs (i0 + ty + 8 p, j0 + tx), p < 4.
__global__ void __launch_bounds__(kDistanceThreads)
    mining_distance_kernel(const float* y, const double* y_norm, int B, int64_t D, bool cosine,
                           float* dist) {
  __shared__ DistanceStage a_stage, b_stage;
  const int i0 = blockIdx.y * kDistanceTile, j0 = blockIdx.x * kDistanceTile;
  const int tx = threadIdx.x % kDistanceTile, ty = threadIdx.x / kDistanceTile;
  constexpr int kRowStep = kDistanceThreads / kDistanceTile;  // 8
  double acc[kDistanceRowsPerThread] = {};
  for (int64_t k0 = 0; k0 < D; k0 += kDistanceChunk) {
    stage_rows(y, B, D, i0, k0, a_stage);
    stage_rows(y, B, D, j0, k0, b_stage);
    __syncthreads();
    const int kmax = static_cast<int>(D - k0 < kDistanceChunk ? D - k0 : kDistanceChunk);
    for (int k = 0; k < kmax; ++k) {  // ascending k: the CPU's summation order
      const double b = b_stage[k][tx];
      for (int p = 0; p < kDistanceRowsPerThread; ++p) {
        const double a = a_stage[k][ty + kRowStep * p];
        if (cosine) {
          acc[p] = fma(a, b, acc[p]);
        } else {
          const double diff = a - b;
          acc[p] = fma(diff, diff, acc[p]);
        }
      }
    }
    __syncthreads();  // the stages are overwritten by the next chunk
  }
  const int j = j0 + tx;
  if (j >= B) return;
  for (int p = 0; p < kDistanceRowsPerThread; ++p) {
    const int i = i0 + ty + kRowStep * p;
    if (i >= B) continue;
    double value;
    if (cosine) {
      const double eps = static_cast<double>(static_cast<float>(kCosineEps));  // the CPU's T eps
      value = 1.0 - acc[p] / (fmax(y_norm[i], eps) * fmax(y_norm[j], eps));
    } else {
      value = sqrt(fmax(acc[p], 0.0));
    }
    dist[static_cast<int64_t>(i) * B + j] = static_cast<float>(value);
  }
}

// ---- 3. mining (the rules: triplet_mining.cuh) ---------------------------------------------

struct MiningOutputs {
  int64_t* anchor;
  int64_t* positive;
  int64_t* negative;
  float* hardness;
  double* hinge;   // [P]: max(h, 0), NaN for a broken SPC-2 pair
  double* coef_p;  // [P]: N, E: 1 / (P |u|); C: 1 / P; 0 when the hinge is inactive
  double* coef_n;  // [P]: N, E: 1 / (P |v|); C: 1 / P
};

__global__ void mine_kernel(const float* dist, const float* y, const double* y_norm,
                            const int64_t* labels, int B, int64_t D, Miner miner, Metric metric,
                            double margin, uint64_t seed, uint64_t offset, MiningOutputs out) {
  const int P = B / 2;
  const int i = blockIdx.x * kAnchorsPerBlock + threadIdx.x / kWarpSize;
  if (i >= P) return;  // the whole warp leaves together
  const int lane = threadIdx.x % kWarpSize;
  const int a = 2 * i, partner = 2 * i + 1;
  AnchorRow row{dist + static_cast<int64_t>(a) * B, labels, labels[a], B};
  const bool valid_pair = labels[partner] == row.label;
  const double u0 = stream_uniform(seed, offset, 2 * int64_t(i));
  const double u1 = stream_uniform(seed, offset, 2 * int64_t(i) + 1);

  int p = partner, n = 0;
  switch (miner) {
    case Miner::Random:
      n = random_negative(row, u0);
      break;
    case Miner::Semihard:
      row.d_partner = row.d[partner];
      row.margin = margin;
      n = semihard_negative(row, u0);
      break;
    case Miner::Softhard:
      softhard_pair(row, partner, u0, u1, p, n);
      break;
    case Miner::Distance:
      n = distance_weighted_negative(row, D, u0);
      break;
    case Miner::Hardest:
      n = hardest_negative(row, u0);
      break;
  }

  // The loss distances of (a, p) and (a, n) over D: lanes stride k.
  const float* ya = y + a * D;
  const float* yp = y + p * D;
  const float* yn = y + n * D;
  double sum_p = 0.0, sum_n = 0.0;
  for (int64_t k = lane; k < D; k += kWarpSize) {
    if (metric == Metric::C) {
      sum_p += double(ya[k]) * double(yp[k]);
      sum_n += double(ya[k]) * double(yn[k]);
    } else {
      const double u = double(ya[k]) - double(yp[k]) + kRowDistanceEps;
      const double v = double(ya[k]) - double(yn[k]) + kRowDistanceEps;
      sum_p += u * u;
      sum_n += v * v;
    }
  }
  sum_p = warp_sum(sum_p);
  sum_n = warp_sum(sum_n);
  if (lane != 0) return;

  double dap, dan;
  if (metric == Metric::C) {
    const double ra = fmax(y_norm[a], kNormEps);
    dap = 1.0 - sum_p / (ra * fmax(y_norm[p], kNormEps));
    dan = 1.0 - sum_n / (ra * fmax(y_norm[n], kNormEps));
  } else {
    dap = sqrt(sum_p);
    dan = sqrt(sum_n);
  }
  const double h = dap - dan + margin;
  const double scale = 1.0 / static_cast<double>(P);
  double hinge = 0.0, coef_p = 0.0, coef_n = 0.0;
  if (!valid_pair) {
    hinge = coef_p = coef_n = NAN;
  } else if (h > 0.0) {  // relu: no gradient at exactly 0
    hinge = h;
    if (metric == Metric::C) {
      coef_p = coef_n = scale;
    } else {
      coef_p = dap > 0.0 ? scale / dap : 0.0;
      coef_n = dan > 0.0 ? scale / dan : 0.0;
    }
  }
  out.anchor[i] = a;
  out.positive[i] = p;
  out.negative[i] = n;
  out.hardness[i] = static_cast<float>(double(row.d[p]) - double(row.d[n]));
  out.hinge[i] = hinge;
  out.coef_p[i] = coef_p;
  out.coef_n[i] = coef_n;
}

// ---- 4. loss and gradient --------------------------------------------------------------------

struct TripletList {
  const int64_t* anchor;
  const int64_t* positive;
  const int64_t* negative;
  const double* hinge;
  const double* coef_p;
  const double* coef_n;
};

// dL/dy_rk (N, E) or dL/dyh_rk (C) of row r at column k, from the row's (triplet, roles) list.
__device__ inline double row_gradient(const TripletList& t, const int* entries,
                                      const unsigned char* roles, int count, const float* y,
                                      const double* y_norm, int64_t D, bool cosine, int64_t k) {
  double g = 0.0;
  for (int e = 0; e < count; ++e) {
    const int i = entries[e];
    const int role = roles[e];
    const int64_t a = t.anchor[i], p = t.positive[i], n = t.negative[i];
    const double ya = y[a * D + k], yp = y[p * D + k], yn = y[n * D + k];
    if (cosine) {
      const double ha = ya / fmax(y_norm[a], kNormEps);
      const double hp = yp / fmax(y_norm[p], kNormEps);
      const double hn = yn / fmax(y_norm[n], kNormEps);
      const double c = t.coef_p[i];
      if (role & kRoleAnchor) g += c * (hn - hp);
      if (role & kRolePositive) g -= c * ha;
      if (role & kRoleNegative) g += c * ha;
    } else {
      const double up = t.coef_p[i] * (ya - yp + kRowDistanceEps);
      const double vn = t.coef_n[i] * (ya - yn + kRowDistanceEps);
      if (role & kRoleAnchor) g += up - vn;
      if (role & kRolePositive) g -= up;
      if (role & kRoleNegative) g += vn;
    }
  }
  return g;
}

// l2_normalize's backward for one element given <z, g> and |z|.
__device__ inline double normalize_backward(double g, double z, double z_dot_g, double norm) {
  if (norm < kNormEps) return g / kNormEps;
  return (g - z * (z_dot_g / (norm * norm))) / norm;
}

__global__ void __launch_bounds__(kGradientThreads)
    loss_gradient_kernel(TripletList t, const float* x, const float* y, const float* x_norm,
                         const double* y_norm, int B, int64_t D, Metric metric, float* loss,
                         float* grad) {
  const int P = B / 2;
  const int r = blockIdx.x;
  if (r == 0 && threadIdx.x == 0) {
    double sum = 0.0;
    for (int i = 0; i < P; ++i) sum += t.hinge[i];  // index order, as the CPU twin
    *loss = static_cast<float>(sum / static_cast<double>(P));
  }
  if (grad == nullptr) return;

  __shared__ int entries[kMaxTriplets];
  __shared__ unsigned char roles[kMaxTriplets];
  __shared__ int count;
  __shared__ double scratch[kGradientThreads / kWarpSize];
  if (threadIdx.x < kWarpSize) {  // warp 0: the triplets row r takes part in, in ascending order
    const int lane = threadIdx.x;
    int found = 0;
    for (int i0 = 0; i0 < P; i0 += kWarpSize) {
      const int i = i0 + lane;
      int role = 0;
      // hinge > 0: active; NaN (broken pair): passed on so the row's gradient turns NaN
      if (i < P && !(t.hinge[i] == 0.0)) {
        if (t.anchor[i] == r) role |= kRoleAnchor;
        if (t.positive[i] == r) role |= kRolePositive;
        if (t.negative[i] == r) role |= kRoleNegative;
      }
      const unsigned mask = __ballot_sync(kFullWarpMask, role != 0);
      if (role != 0) {
        const int slot = found + __popc(mask & ((1u << lane) - 1u));
        entries[slot] = i;
        roles[slot] = static_cast<unsigned char>(role);
      }
      found += __popc(mask);
    }
    if (lane == 0) count = found;
  }
  __syncthreads();

  const bool cosine = metric == Metric::C;
  const float* x_row = x + r * D;
  const float* y_row = y + r * D;
  float* grad_row = grad + r * D;
  if (metric == Metric::E) {
    for (int64_t k = threadIdx.x; k < D; k += kGradientThreads) {
      grad_row[k] =
          static_cast<float>(row_gradient(t, entries, roles, count, y, y_norm, D, false, k));
    }
    return;
  }
  // C: back through yh = y / |y| first (<y, g> over the row).
  double y_dot_g = 0.0;
  if (cosine) {
    double partial = 0.0;
    for (int64_t k = threadIdx.x; k < D; k += kGradientThreads) {
      partial += double(y_row[k]) * row_gradient(t, entries, roles, count, y, y_norm, D, true, k);
    }
    y_dot_g = block_sum(partial, scratch);
  }
  // dL/dy_rk for N and C.
  auto y_gradient = [&](int64_t k) {
    const double g = row_gradient(t, entries, roles, count, y, y_norm, D, cosine, k);
    return cosine ? normalize_backward(g, y_row[k], y_dot_g, y_norm[r]) : g;
  };
  double partial = 0.0;
  for (int64_t k = threadIdx.x; k < D; k += kGradientThreads) {
    partial += double(x_row[k]) * y_gradient(k);
  }
  const double x_dot_g = block_sum(partial, scratch);
  const double norm = x_norm[r];
  for (int64_t k = threadIdx.x; k < D; k += kGradientThreads) {
    grad_row[k] = static_cast<float>(normalize_backward(y_gradient(k), x_row[k], x_dot_g, norm));
  }
}

}  // namespace

void fused_triplet_cuda(const float* x, const int64_t* labels, int64_t B, int64_t D, Miner miner,
                        Metric metric, double margin, uint64_t seed, uint64_t offset, float* loss,
                        float* grad, int64_t* anchor, int64_t* positive, int64_t* negative,
                        float* hardness) {
  check_fused_triplet_args("fused_triplet_cuda", B, D, margin);
  const int batch = static_cast<int>(B), P = batch / 2;
  const bool normalizes = metric != Metric::E;
  cudaStream_t stream = current_stream();

  // Workspace slices: y (N, C), |x|, |y|, distances, hinge, coef_p, coef_n.
  const size_t y_bytes = normalizes ? workspace_aligned(sizeof(float) * B * D) : 0;
  const size_t x_norm_bytes = workspace_aligned(sizeof(float) * B);
  const size_t y_norm_bytes = workspace_aligned(sizeof(double) * B);
  const size_t dist_bytes = workspace_aligned(sizeof(float) * B * B);
  const size_t per_triplet_bytes = workspace_aligned(sizeof(double) * P);
  const size_t total = y_bytes + x_norm_bytes + y_norm_bytes + dist_bytes + 3 * per_triplet_bytes;
  StreamWorkspace workspace(total, stream, "fused_triplet_cuda for [", B, ", ", D, "]");
  char* cursor = workspace.bytes();
  auto take = [&cursor](size_t bytes) {
    char* slice = cursor;
    cursor += bytes;
    return slice;
  };
  float* y_storage = reinterpret_cast<float*>(take(y_bytes));
  float* x_norm = reinterpret_cast<float*>(take(x_norm_bytes));
  double* y_norm = reinterpret_cast<double*>(take(y_norm_bytes));
  float* dist = reinterpret_cast<float*>(take(dist_bytes));
  double* hinge = reinterpret_cast<double*>(take(per_triplet_bytes));
  double* coef_p = reinterpret_cast<double*>(take(per_triplet_bytes));
  double* coef_n = reinterpret_cast<double*>(take(per_triplet_bytes));
  const float* y = normalizes ? y_storage : x;

  normalize_rows_kernel<<<static_cast<unsigned>(ceil_div(B, kRowsPerNormalizeBlock)),
                          kRowsPerNormalizeBlock, 0, stream>>>(x, batch, D, normalizes, y_storage,
                                                               x_norm, y_norm);
  CUDA_CHECK_LAUNCH("fused_triplet_cuda normalize [", B, ", ", D, "]");

  const unsigned tiles = static_cast<unsigned>(ceil_div(B, kDistanceTile));
  mining_distance_kernel<<<dim3(tiles, tiles), kDistanceThreads, 0, stream>>>(
      y, y_norm, batch, D, metric == Metric::C, dist);
  CUDA_CHECK_LAUNCH("fused_triplet_cuda mining distances [", B, ", ", D, "]");

  const MiningOutputs mined{anchor, positive, negative, hardness, hinge, coef_p, coef_n};
  mine_kernel<<<static_cast<unsigned>(ceil_div(P, kAnchorsPerBlock)), kAnchorsPerBlock * kWarpSize,
                0, stream>>>(dist, y, y_norm, labels, batch, D, miner, metric, margin, seed, offset,
                             mined);
  CUDA_CHECK_LAUNCH("fused_triplet_cuda mining [", B, ", ", D, "]");

  const TripletList list{anchor, positive, negative, hinge, coef_p, coef_n};
  loss_gradient_kernel<<<grad != nullptr ? static_cast<unsigned>(B) : 1u, kGradientThreads, 0,
                         stream>>>(list, x, y, x_norm, y_norm, batch, D, metric, loss, grad);
  CUDA_CHECK_LAUNCH("fused_triplet_cuda loss and gradient [", B, ", ", D, "]");

  workspace.release("fused_triplet_cuda workspace free");
}

}  // namespace engine::kernels
