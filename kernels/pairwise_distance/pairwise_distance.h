// pairwise_distance: every row of a [N, D] against every row of b [M, D] -> out [N, M].
//
// Math, for rows a_i, b_j:
//   SquaredEuclidean:  out_ij = sum_d (a_id - b_jd)^2
//   Euclidean:         out_ij = sqrt(max(sum_d (a_id - b_jd)^2, 0))
//   Cosine:            out_ij = 1 - <a_i, b_j> / (max(|a_i|, eps) max(|b_j|, eps))
// The squared distance is summed from differences, never expanded as |a|^2 + |b|^2 - 2<a, b>:
// the expansion cancels catastrophically for near rows and can go negative (sqrt -> NaN); the
// direct sum is >= 0 and exactly 0 for identical rows.
// Backward (g = dL/dout):
//   SquaredEuclidean:  da_i = sum_j 2 g_ij (a_i - b_j),        db_j = -sum_i 2 g_ij (a_i - b_j)
//   Euclidean:         da_i = sum_j g_ij (a_i - b_j) / out_ij, db_j = -(same terms); a pair at
//                      distance 0 contributes 0 (a subgradient; keeps the diagonal NaN-free)
//   Cosine:            with r_a = max(|a_i|, eps), r_b = max(|b_j|, eps), s_ij = 1 - out_ij,
//                      da_i = -sum_j g_ij (b_j / (r_a r_b) - [|a_i| >= eps] s_ij a_i / r_a^2)
//                      db_j = -sum_i g_ij (a_i / (r_a r_b) - [|b_j| >= eps] s_ij b_j / r_b^2)
// Layout: a, b, grad_a, grad_b contiguous row-major; out and grad_out row-major [N, M].
// Parallelization: the reference is plain loops over (i, j, d) with double accumulators; the fast
// path splits rows over OpenMP threads and vectorizes the d-loops. The backward recomputes the
// distances instead of reading the forward's output, so nothing but a and b is saved.
// Cost: forward 3 N M D FLOPs for the (squared) Euclidean metrics (subtract, multiply, add),
// 2 N M D + 2 (N + M) D for cosine (dot products, norms); it must read (N + M) D elements and
// write N M.
// The backward recomputes each pair's distance and adds 2-3 N M D FLOPs per requested gradient
// (the fast path recomputes the distance once per requested gradient: one loop per gradient).
#pragma once

#include <cstdint>

namespace engine::kernels {

enum class PairwiseMetric { Euclidean, SquaredEuclidean, Cosine };

template <typename T>
void pairwise_distance_forward_cpu(const T* a, const T* b, int64_t N, int64_t M, int64_t D,
                                   PairwiseMetric metric, T eps, T* out);

// grad_a or grad_b may be null: that gradient is not computed.
template <typename T>
void pairwise_distance_backward_cpu(const T* grad_out, const T* a, const T* b, int64_t N, int64_t M,
                                    int64_t D, PairwiseMetric metric, T eps, T* grad_a, T* grad_b);

// The fast path of the CPU ops: the same formulas and double accumulators, parallel over rows
// and vectorized (the sums' order differs from the reference's; pairwise_distance_cpu.cpp).
template <typename T>
void pairwise_distance_forward_fast_cpu(const T* a, const T* b, int64_t N, int64_t M, int64_t D,
                                        PairwiseMetric metric, T eps, T* out);
template <typename T>
void pairwise_distance_backward_fast_cpu(const T* grad_out, const T* a, const T* b, int64_t N,
                                         int64_t M, int64_t D, PairwiseMetric metric, T eps,
                                         T* grad_a, T* grad_b);

// CUDA twins (f32, device pointers, same arguments): 64x64 output tiles through shared memory;
// the backward materializes an [N, M] coefficient matrix in a stream-ordered workspace and runs
// two tiled GEMMs (pairwise_distance_cuda.cu).
void pairwise_distance_forward_cuda(const float* a, const float* b, int64_t N, int64_t M, int64_t D,
                                    PairwiseMetric metric, float eps, float* out);
void pairwise_distance_backward_cuda(const float* grad_out, const float* a, const float* b,
                                     int64_t N, int64_t M, int64_t D, PairwiseMetric metric,
                                     float eps, float* grad_a, float* grad_b);

}  // namespace engine::kernels
