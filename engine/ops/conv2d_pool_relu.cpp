// conv2d_pool_relu (declaration in engine/ops.h; math, kernels and byte counts in
// kernels/conv2d_pool_relu/conv2d_pool_relu.h): C2F2's conv -> 2x2 max-pool -> ReLU block.
//
// CUDA tensors run the fused forward kernel; CPU tensors (f32, f64) run its reference, the
// composition of the plain-loop reference ops, so the f64 gradient checks cover the fused
// backward (for tests: it is slow; the CPU C2F2 keeps the unfused ops unless ENGINE_FUSED asks).
// Backward: the window index sends dy to one cell of each window (the unpool kernel), which is
// the conv output's gradient, and conv2d's own backward (dgrad, wgrad, db as asked) does the rest.
// The window index is one byte per output; the engine has no byte dtype, so it lives in an I64
// tensor of ceil(outputs / 8) elements used as raw bytes, never seen outside this op.
// The fused forward kernel and its CPU reference are strict FP32: under the precision policies
// tf32 and bf16 (engine/precision.h) an f32 call, CUDA or CPU, runs the op's definition unfused
// instead, so that its convolution is conv2d's, with operands rounded in that precision.
#include <utility>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops/conv2d_internal.h"
#include "engine/ops/op_utils.h"
#include "kernels/conv2d_pool_relu/conv2d_pool_relu.h"

namespace engine {

namespace {

uint8_t* bytes(const Tensor& window) { return reinterpret_cast<uint8_t*>(window.data<int64_t>()); }

}  // namespace

Tensor conv2d_pool_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const Conv2dOptions& options) {
  const kernels::Conv2dShape shape = detail::conv2d_shape(x, weight, bias, options);
  const int64_t P = shape.out_h(), Q = shape.out_w();
  ENGINE_CHECK(P >= 2 && Q >= 2, "conv2d_pool_relu: the conv output ", P, "x", Q,
               " is smaller than the 2x2 pool window (x ", shape_str(x.shape()), ", weight ",
               shape_str(weight.shape()), ")");
  if (detail::policy_rounds_operands(x)) {
    return relu(max_pool2d(conv2d(x, weight, bias, options), Pool2dOptions{}));
  }
  const Tensor xc = x.contiguous();
  const Tensor wc = weight.contiguous();
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  Tensor y = Tensor::empty({shape.N, shape.K, P / 2, Q / 2}, x.dtype(), x.device());
  const int64_t outputs = y.numel();
  Tensor window = Tensor::empty({(outputs + 7) / 8}, DType::I64, x.device());
  if (x.device().is_cuda()) {  // CUDA tensors are always f32
    kernels::conv2d_pool_relu_forward_cuda(shape, xc.data<float>(), wc.data<float>(),
                                           bc.defined() ? bc.data<float>() : nullptr,
                                           y.data<float>(), bytes(window));
  } else {
    detail::dispatch_floating(x.dtype(), "conv2d_pool_relu", [&](auto zero) {
      using T = decltype(zero);
      kernels::conv2d_pool_relu_forward_cpu<T>(shape, xc.data<T>(), wc.data<T>(),
                                               bc.defined() ? bc.data<T>() : nullptr, y.data<T>(),
                                               bytes(window));
    });
  }
  if (!needs_tape({x, weight, bias})) return y;

  BackwardFn backward = [shape, window, x_saved = xc.detach(), w_saved = wc.detach(),
                         has_bias = bias.defined()](const Tensor& grad_output,
                                                    const std::vector<bool>& needs) {
    const Tensor dy = grad_output.contiguous();
    Tensor dz =
        Tensor::empty({shape.N, shape.K, shape.out_h(), shape.out_w()}, dy.dtype(), dy.device());
    if (dy.device().is_cuda()) {
      kernels::conv2d_pool_relu_unpool_cuda(shape, dy.data<float>(), bytes(window),
                                            dz.data<float>());
    } else {
      detail::dispatch_floating(dy.dtype(), "conv2d_pool_relu backward", [&](auto zero) {
        using T = decltype(zero);
        kernels::conv2d_pool_relu_unpool_cpu<T>(shape, dy.data<T>(), bytes(window), dz.data<T>());
      });
    }
    return detail::conv2d_backward(shape, dz, x_saved, w_saved, has_bias, needs);
  };
  return record("conv2d_pool_relu", {x, weight, bias}, y, std::move(backward),
                {{"input", xc}, {"weight", wc}});
}

}  // namespace engine
