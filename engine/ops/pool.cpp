// max_pool2d, avg_pool2d, adaptive_avg_pool2d (declarations in engine/ops.h; math and kernels in
// kernels/pool/pool.h). max_pool2d saves its input and recomputes each window's argmax in the
// backward; the average pools save nothing but the geometry. CUDA tensors (always f32) run the
// *_cuda kernels, CPU tensors the templated reference loops (max_pool2d: the *_fast_cpu versions,
// which equal the reference bit for bit and are quicker for 2x2 / stride-2 windows).
#include <utility>
#include <vector>

#include "engine/ops.h"
#include "engine/ops/op_utils.h"
#include "kernels/pool/pool.h"

namespace engine {

namespace {

// Validates x [N, C, H, W] and the options like PyTorch (kernel >= 1, stride >= 1,
// 0 <= pad <= kernel / 2, at least one output row and column); returns the geometry.
kernels::Pool2dShape pool_shape(const Tensor& x, const Pool2dOptions& options, const char* op) {
  detail::check_floating(x, op, "x");
  ENGINE_CHECK(x.dim() == 4, op, ": x must be 4-D [N, C, H, W], got shape ", shape_str(x.shape()));
  ENGINE_CHECK(options.kernel_h >= 1 && options.kernel_w >= 1, op, ": kernel must be >= 1, got ",
               options.kernel_h, "x", options.kernel_w);
  ENGINE_CHECK(options.stride_h >= 1 && options.stride_w >= 1, op, ": stride must be >= 1, got ",
               options.stride_h, "x", options.stride_w);
  ENGINE_CHECK(options.pad_h >= 0 && options.pad_w >= 0 && 2 * options.pad_h <= options.kernel_h &&
                   2 * options.pad_w <= options.kernel_w,
               op, ": padding ", options.pad_h, "x", options.pad_w,
               " must be between 0 and half the kernel ", options.kernel_h, "x", options.kernel_w);

  kernels::Pool2dShape shape;
  shape.N = x.size(0);
  shape.C = x.size(1);
  shape.H = x.size(2);
  shape.W = x.size(3);
  shape.kernel_h = options.kernel_h;
  shape.kernel_w = options.kernel_w;
  shape.stride_h = options.stride_h;
  shape.stride_w = options.stride_w;
  shape.pad_h = options.pad_h;
  shape.pad_w = options.pad_w;
  const int64_t padded_h = shape.H + 2 * shape.pad_h, padded_w = shape.W + 2 * shape.pad_w;
  ENGINE_CHECK(shape.kernel_h <= padded_h && shape.kernel_w <= padded_w, op, ": kernel ",
               shape.kernel_h, "x", shape.kernel_w, " is larger than the padded input ", padded_h,
               "x", padded_w, " (x ", shape_str(x.shape()), ", padding ", shape.pad_h, "x",
               shape.pad_w, ")");
  return shape;
}

Tensor pool_output(const kernels::Pool2dShape& shape, const Tensor& x) {
  return Tensor::empty({shape.N, shape.C, shape.out_h(), shape.out_w()}, x.dtype(), x.device());
}

}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options) {
  const kernels::Pool2dShape shape = pool_shape(x, options, "max_pool2d");
  const Tensor xc = x.contiguous();
  Tensor y = pool_output(shape, x);
  if (x.device().is_cuda()) {
    kernels::max_pool2d_forward_cuda(shape, xc.data<float>(), y.data<float>());
  } else {
    detail::dispatch_floating(x.dtype(), "max_pool2d", [&](auto zero) {
      using T = decltype(zero);
      kernels::max_pool2d_forward_fast_cpu<T>(shape, xc.data<T>(), y.data<T>());
    });
  }
  if (!needs_tape({x})) return y;

  BackwardFn backward = [shape, x_saved = xc.detach()](const Tensor& grad_output,
                                                       const std::vector<bool>& needs) {
    if (!needs[0]) return std::vector<Tensor>{Tensor()};
    const Tensor dy = grad_output.contiguous();
    Tensor dx = Tensor::empty(x_saved.shape(), x_saved.dtype(), x_saved.device());
    if (dx.device().is_cuda()) {
      kernels::max_pool2d_backward_cuda(shape, x_saved.data<float>(), dy.data<float>(),
                                        dx.data<float>());
      return std::vector<Tensor>{dx};
    }
    detail::dispatch_floating(dy.dtype(), "max_pool2d backward", [&](auto zero) {
      using T = decltype(zero);
      kernels::max_pool2d_backward_fast_cpu<T>(shape, x_saved.data<T>(), dy.data<T>(),
                                               dx.data<T>());
    });
    return std::vector<Tensor>{dx};
  };
  return record("max_pool2d", {x}, y, std::move(backward), {{"input", xc}});
}

Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options) {
  const kernels::Pool2dShape shape = pool_shape(x, options, "avg_pool2d");
  const Tensor xc = x.contiguous();
  Tensor y = pool_output(shape, x);
  if (x.device().is_cuda()) {
    kernels::avg_pool2d_forward_cuda(shape, xc.data<float>(), y.data<float>());
  } else {
    detail::dispatch_floating(x.dtype(), "avg_pool2d", [&](auto zero) {
      using T = decltype(zero);
      kernels::avg_pool2d_forward_cpu<T>(shape, xc.data<T>(), y.data<T>());
    });
  }
  if (!needs_tape({x})) return y;

  BackwardFn backward = [shape, dtype = x.dtype(), device = x.device()](
                            const Tensor& grad_output, const std::vector<bool>& needs) {
    if (!needs[0]) return std::vector<Tensor>{Tensor()};
    const Tensor dy = grad_output.contiguous();
    Tensor dx = Tensor::empty({shape.N, shape.C, shape.H, shape.W}, dtype, device);
    if (device.is_cuda()) {
      kernels::avg_pool2d_backward_cuda(shape, dy.data<float>(), dx.data<float>());
      return std::vector<Tensor>{dx};
    }
    detail::dispatch_floating(dtype, "avg_pool2d backward", [&](auto zero) {
      using T = decltype(zero);
      kernels::avg_pool2d_backward_cpu<T>(shape, dy.data<T>(), dx.data<T>());
    });
    return std::vector<Tensor>{dx};
  };
  return record("avg_pool2d", {x}, y, std::move(backward));
}

Tensor adaptive_avg_pool2d(const Tensor& x) {
  detail::check_floating(x, "adaptive_avg_pool2d", "x");
  ENGINE_CHECK(x.dim() == 4, "adaptive_avg_pool2d: x must be 4-D [N, C, H, W], got shape ",
               shape_str(x.shape()));
  ENGINE_CHECK(x.size(2) >= 1 && x.size(3) >= 1,
               "adaptive_avg_pool2d: x must have H, W >= 1, got shape ", shape_str(x.shape()));
  const Shape x_shape = x.shape();
  const int64_t planes = x.size(0) * x.size(1), plane_size = x.size(2) * x.size(3);
  const Tensor xc = x.contiguous();
  Tensor y = Tensor::empty({x.size(0), x.size(1), 1, 1}, x.dtype(), x.device());
  if (x.device().is_cuda()) {
    kernels::adaptive_avg_pool2d_forward_cuda(planes, plane_size, xc.data<float>(),
                                              y.data<float>());
  } else {
    detail::dispatch_floating(x.dtype(), "adaptive_avg_pool2d", [&](auto zero) {
      using T = decltype(zero);
      kernels::adaptive_avg_pool2d_forward_cpu<T>(planes, plane_size, xc.data<T>(), y.data<T>());
    });
  }
  if (!needs_tape({x})) return y;

  BackwardFn backward = [x_shape, planes, plane_size, dtype = x.dtype(), device = x.device()](
                            const Tensor& grad_output, const std::vector<bool>& needs) {
    if (!needs[0]) return std::vector<Tensor>{Tensor()};
    const Tensor dy = grad_output.contiguous();
    Tensor dx = Tensor::empty(x_shape, dtype, device);
    if (device.is_cuda()) {
      kernels::adaptive_avg_pool2d_backward_cuda(planes, plane_size, dy.data<float>(),
                                                 dx.data<float>());
      return std::vector<Tensor>{dx};
    }
    detail::dispatch_floating(dtype, "adaptive_avg_pool2d backward", [&](auto zero) {
      using T = decltype(zero);
      kernels::adaptive_avg_pool2d_backward_cpu<T>(planes, plane_size, dy.data<T>(), dx.data<T>());
    });
    return std::vector<Tensor>{dx};
  };
  return record("adaptive_avg_pool2d", {x}, y, std::move(backward));
}

}  // namespace engine
