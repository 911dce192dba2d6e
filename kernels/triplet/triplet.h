// Fused SPC-2 triplet loss: normalize + B x B mining distances + mining + triplet loss + its
// gradient with respect to the raw embeddings, in one call (CPU twin) or four kernel launches
// with no host synchronization (CUDA).
//
// Input: an SPC-2 batch x [B, D] (B = 2P even, 2 <= B <= 1024), rows [a0, p0, a1, p1, ...], and
// labels [B] with labels[2i] == labels[2i + 1] (losses/distance.h). Triplet i has anchor 2i.
//
// Math (exactly losses::mine_triplets followed by losses::triplet_loss, losses/miners.h and
// losses/triplet.h, with one margin m for semihard's band and the hinge; metrics N, E, C of
// kernels/common/metric.h):
//   1. y_i = x_i / max(|x_i|, 1e-12) for metrics N and C (|x_i| summed in f64, rounded to T, as
//      the engine's l2_normalize); y = x for E.
//   2. Mining distances, as the engine's pairwise_distance kernel computes them on y (f64
//      accumulation, rounded to T): N, E  d_ij = sqrt(sum_k (y_ik - y_jk)^2)  (exact 0 diagonal);
//      C  d_ij = 1 - <y_i, y_j> / (max(|y_i|, 1e-12) max(|y_j|, 1e-12)).
//   3. Mining with the rules of triplet_mining.h on d (in f64). Uniforms: anchor i uses elements
//      2i (u0) and 2i + 1 (u1) of the Philox uniform stream (seed, offset) -- the same 2P values
//      losses::mine_triplets draws with engine::uniform({2P}, 0, 1, gen, F64) when gen.offset
//      == offset: block offset + e / 4, word e % 4, u = philox_uniform01(word). A uniform pick
//      among n candidates (ascending index) takes candidate floor(u n).
//   4. hardness_i = d(a, p) - d(a, n) from the mining distances.
//   5. Loss L = (1/P) sum_i max(0, h_i), h_i = D(a, p) - D(a, n) + m with the loss distance
//      D (row_distance): N, E  D(a, b) = |y_a - y_b + 1e-6| (PyTorch's pairwise_distance);
//      C  D(a, b) = 1 - <yh_a, yh_b>, yh = y / max(|y|, 1e-12) (the loss normalizes again, as
//      losses::triplet_loss does).
//   6. Gradient (hinge gradient 0 at h = 0, like relu): for an active triplet, with
//      u = y_a - y_p + 1e-6, v = y_a - y_n + 1e-6 (N, E):
//        dL/dy_a += (u/|u| - v/|v|) / P,  dL/dy_p -= u/|u| / P,  dL/dy_n += v/|v| / P
//      (a zero |u| or |v| contributes 0); for C:
//        dL/dyh_a += (yh_n - yh_p) / P,   dL/dyh_p -= yh_a / P,   dL/dyh_n += yh_a / P
//      then back through yh = y / |y| (C) and y = x / |x| (N, C), each as l2_normalize's
//      backward: g_in = (g - z <z, g> / |z|^2) / |z|, or g / 1e-12 where |z| < 1e-12.
// Labels that break the SPC-2 layout: the CPU twin throws; the CUDA kernel cannot throw without
// a host synchronization, so it writes NaN into the loss and into the gradient rows of that
// anchor's triplet (a failure nobody can miss).
// Layout: x, grad [B, D] row-major; labels, anchor, positive, negative [B / 2] i64 (labels [B]);
// hardness [B / 2]; loss one element. grad may be null: only the loss, triplets and hardness.
// Cost: mining distances 3 B^2 D FLOPs (f64 on the GPU), loss and gradient O(P D), mining O(P B);
// the floor is reading x (4 B D bytes) and writing grad (4 B D bytes); the B x B matrix (4 B^2
// bytes) stays in L2 on the GPU. Parallelization: see triplet_cuda.cu.
#pragma once

#include <cstdint>

#include "kernels/common/metric.h"
#include "kernels/triplet/triplet_mining.h"

namespace engine::kernels {

// The largest batch the fused path takes (the CUDA kernels keep a row of B distances per warp
// and a B x B matrix in a workspace).
constexpr int64_t kFusedTripletMaxBatch = 1024;

// The rules on the batch and margin of both implementations: an SPC-2 batch [B, D] with B even,
// 2 <= B <= kFusedTripletMaxBatch, D >= 1, and a finite margin; engine::Error otherwise, its
// message starting with `name` (the caller's).
void check_fused_triplet_args(const char* name, int64_t B, int64_t D, double margin);

// CPU twin, the oracle: plain loops, f64 accumulation. x, labels and every output on the host.
// Also checks the SPC-2 labels (labels[2i] == labels[2i + 1]), which are on the host here.
template <typename T>
void fused_triplet_cpu(const T* x, const int64_t* labels, int64_t B, int64_t D, Miner miner,
                       Metric metric, double margin, uint64_t seed, uint64_t offset, T* loss,
                       T* grad, int64_t* anchor, int64_t* positive, int64_t* negative, T* hardness);

// CUDA (f32, device pointers, current stream; no host synchronization): triplet_cuda.cu.
void fused_triplet_cuda(const float* x, const int64_t* labels, int64_t B, int64_t D, Miner miner,
                        Metric metric, double margin, uint64_t seed, uint64_t offset, float* loss,
                        float* grad, int64_t* anchor, int64_t* positive, int64_t* negative,
                        float* hardness);

}  // namespace engine::kernels
