// linear_l2_normalize: an embedding head followed by the row normalization a metric N / cosine
// loss applies to it (losses/distance.cpp, margin.cpp, ...: l2_normalize(model(x)); issue 32,
// deliverable 3c; C2F2's fc2). C2F2 itself returns the unnormalized embedding (c2f2.h), so the
// model does not call this op: the losses would, with the embedding head's weights.
//
// Math:   z[i, j] = b[j] + sum_p x[i, p] w[j, p]             (linear)
//         norm_i = sqrt(sum_j z_ij^2), y_i = z_i / max(norm_i, eps)   (l2_normalize.h)
//         backward: dz from l2_normalize's backward (reads z and norm), then linear's GEMMs.
// Layout: x [m, k], w [n, k], b [n] or nullptr; z, y [m, n]; norm [m]; row-major, contiguous.
//         z is an output: the backward reads it (l2_normalize_backward's x).
// Implementations with identical arguments:
//   linear_l2_normalize_forward_cpu (float, double): the reference, the composition of
//     matmul_cpu (x w^T), add_row_bias_cpu and l2_normalize_forward_cpu.
//   linear_l2_normalize_forward_cuda (f32): the SGEMM with the bias in its store
//     (matmul_bias_relu_cuda, no relu), then l2_normalize_forward_cuda: bit for bit the unfused
//     matmul_cuda, add_row_bias_cuda and l2_normalize_forward_cuda; 2 kernels instead of 3.
//     Folding the normalization into the GEMM's store would need one block to own whole rows
//     (n = 512 columns against the tile's 128): a block row-sum across 4 column tiles, or a
//     512-wide tile with 4x the registers. The count below says it is not worth it.
// Cost at C2F2's fc2 with D = 512 (m = 256, k = 1024, n = 512), MB = 10^6 bytes:
//   FLOPs 2 m n k = 0.27 GFLOP.
//   unfused forward: GEMM 3.7 (x 1.0, w 2.1, z 0.5) + bias 1.0 + l2 forward 1.6 (z twice, y)
//     = 6.3 MB, 3 kernels; fused bias: 5.2 MB, 2 kernels; a fully fused head: 3.7 MB at best.
//   backward: l2 backward 2.1 + dgrad GEMM 3.7, the same either way.
//   An unfused C2F2 attack pass at 256 images moves ~330 MB (the conv blocks 275,
//   conv2d_pool_relu.h; fc1 41; fc2 12): fc2's possible saving (2.6 MB) is under 1 %; the
//   launch saved (~2-3 us without a CUDA graph) matters more.
#pragma once

#include <cstdint>

namespace engine::kernels {

template <typename T>
void linear_l2_normalize_forward_cpu(int64_t m, int64_t n, int64_t k, const T* x, const T* w,
                                     const T* bias, T eps, T* z, T* y, T* norm);

void linear_l2_normalize_forward_cuda(int64_t m, int64_t n, int64_t k, const float* x,
                                      const float* w, const float* bias, float eps, float* z,
                                      float* y, float* norm);

}  // namespace engine::kernels
