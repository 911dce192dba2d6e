// linear_relu: a fully connected layer, its bias and a ReLU in one GEMM (issue 32, deliverable
// 3b; C2F2's fc1 -> relu3).
//
// Math:   y[i, j] = relu(b[j] + sum_p x[i, p] w[j, p]),  relu(v) = (v < 0 ? 0 : v) (unary.h)
//         backward: dz = dy [y > 0] (y > 0 exactly where the pre-activation is: relu'(0) = 0,
//         NaN passes no gradient), then linear's dx = dz w, dw = dz^T x, db = column sums of dz.
// Layout: x [m, k], w [n, k] (nn::Linear's [out, in]), b [n] or nullptr, y [m, n]; row-major,
//         contiguous.
// Implementations with identical arguments:
//   linear_relu_forward_cpu (float, double): the reference, the composition of the unfused
//     reference ops matmul_cpu (x w^T), add_row_bias_cpu and unary_cpu(Relu).
//   linear_relu_forward_cuda (f32, device pointers, current stream): our SGEMM tile with the
//     bias and the ReLU in its store (matmul_bias_relu_cuda, kernels/matmul): bit for bit the
//     unfused matmul_cuda, add_row_bias_cuda and relu, one kernel instead of three.
//   The backward needs no kernel of its own: the ReLU mask is unary_backward(Relu) read from y,
//   then linear's GEMMs (engine/ops/linear_fused.cpp).
// Cost at C2F2's fc1 (m = 256 images, k = 3136, n = 1024), 4-byte floats, MB = 10^6 bytes:
//   FLOPs 2 m n k = 1.64 GFLOP, unchanged.
//   unfused forward: GEMM 17.1 (x 3.2, w 12.8, y 1.0) + bias 2.1 (y twice) + relu 2.1 = 21.3 MB,
//     3 kernels; fused: 17.1 MB, 1 kernel (-4.2 MB, -2 launches per pass).
//   backward (input gradient): relu mask 3.1 (dy, y, dz) + dgrad GEMM 17.1, the same either way;
//   folding the mask into the dgrad GEMM's loader would save 2.1 MB more (not done: the loader is
//   the tile shared with conv2d and matmul).
#pragma once

#include <cstdint>

namespace engine::kernels {

template <typename T>
void linear_relu_forward_cpu(int64_t m, int64_t n, int64_t k, const T* x, const T* w, const T* bias,
                             T* y);

void linear_relu_forward_cuda(int64_t m, int64_t n, int64_t k, const float* x, const float* w,
                              const float* bias, float* y);

}  // namespace engine::kernels
