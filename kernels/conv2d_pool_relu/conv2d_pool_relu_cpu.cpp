// conv2d_pool_relu on the CPU: the reference, composed of the unfused reference ops (math,
// layout and costs in conv2d_pool_relu.h). Plain loops and temporary buffers: it is the oracle.
#include "kernels/conv2d_pool_relu/conv2d_pool_relu.h"

#include <vector>

#include "kernels/common/instantiate.h"
#include "kernels/unary/unary.h"

namespace engine::kernels {

template <typename T>
void conv2d_pool_relu_forward_cpu(const Conv2dShape& shape, const T* x, const T* w, const T* bias,
                                  T* y, uint8_t* window) {
  const Pool2dShape pool = conv2d_pool_relu_pool_shape(shape);
  const int64_t conv_size = shape.N * shape.K * pool.H * pool.W;
  const int64_t pooled_size = shape.N * shape.K * pool.out_h() * pool.out_w();
  std::vector<T> z(conv_size), m(pooled_size);
  conv2d_fprop_cpu(shape, x, w, bias, z.data());
  max_pool2d_forward_cpu(pool, z.data(), m.data());
  unary_cpu(UnaryOp::Relu, m.data(), pooled_size, UnaryParams{}, y);

  // window: a gradient of ones through relu's and the pool's own backward lands on exactly the
  // cell each window routes to (the windows do not overlap), or nowhere where relu passes none.
  const std::vector<T> ones(pooled_size, T(1));
  std::vector<T> gate(pooled_size), routed(conv_size);
  unary_backward_cpu(UnaryOp::Relu, m.data(), static_cast<const T*>(nullptr), ones.data(),
                     pooled_size, UnaryParams{}, gate.data());
  max_pool2d_backward_cpu(pool, z.data(), gate.data(), routed.data());
  const int64_t P = pool.H, Q = pool.W, P2 = pool.out_h(), Q2 = pool.out_w();
  for (int64_t plane = 0; plane < shape.N * shape.K; ++plane) {
    for (int64_t i = 0; i < P2; ++i) {
      for (int64_t j = 0; j < Q2; ++j) {
        uint8_t cell = kNoGradient;
        for (int64_t d = 0; d < 4; ++d) {
          const int64_t p = 2 * i + d / 2, q = 2 * j + d % 2;
          if (routed[(plane * P + p) * Q + q] != T(0)) cell = static_cast<uint8_t>(d);
        }
        window[(plane * P2 + i) * Q2 + j] = cell;
      }
    }
  }
}

template <typename T>
void conv2d_pool_relu_unpool_cpu(const Conv2dShape& shape, const T* dy, const uint8_t* window,
                                 T* dz) {
  const int64_t P = shape.out_h(), Q = shape.out_w(), P2 = P / 2, Q2 = Q / 2;
  for (int64_t plane = 0; plane < shape.N * shape.K; ++plane) {
    for (int64_t p = 0; p < P; ++p) {
      for (int64_t q = 0; q < Q; ++q) {
        const int64_t i = p / 2, j = q / 2;
        const bool pooled = i < P2 && j < Q2;
        const int64_t o = (plane * P2 + i) * Q2 + j;
        // T(0) + dy: the pool's backward adds dy into a zeroed dx, which turns -0 into +0.
        const bool routed = pooled && window[o] == 2 * (p % 2) + q % 2;
        dz[(plane * P + p) * Q + q] = routed ? T(0) + dy[o] : T(0);
      }
    }
  }
}

ENGINE_INSTANTIATE_FLOATING(conv2d_pool_relu_forward_cpu);
ENGINE_INSTANTIATE_FLOATING(conv2d_pool_relu_unpool_cpu);

}  // namespace engine::kernels
