// conv2d (declaration in engine/ops.h; math and kernels in kernels/conv2d/conv2d.h).
//
// CPU tensors run the im2col + GEMM path (conv2d_*_fast_cpu); the naive loops are the oracle
// the tests hold it to. CUDA tensors (f32) run our implicit-GEMM kernels (conv2d_*_cuda) or
// cuDNN's, whichever engine::conv_backend() names when the kernel runs (engine/backend.h); under
// the precision policy tf32 (engine/precision.h) ours run on TF32 tensor cores
// (conv2d_*_tensor_core_cuda, or on mma.sync, conv2d_*_mma_cuda, under ENGINE_TC_CONV=mma) and
// cuDNN in its TF32 math mode (kernels/common/library_math.h); under bf16 ours run on BF16 tensor
// cores (the same choice of kernels) and cuDNN in BF16. CPU f32 tensors follow tf32 and bf16 by
// rounding copies of each pass's two operands as our tensor-core kernels do (fprop x and w, dgrad
// dy and w, wgrad dy and x; bias, db and the first-layer dgrad, kernels::dgrad_is_first_layer, stay
// FP32) and summing in the im2col GEMM's FP32 order; f64 tensors never round. Backward computes
// exactly the gradients asked for: dgrad only when the input's gradient is needed, wgrad only for
// the weight, db only for the bias — an attack's grad(loss, {x}) never pays for a weight gradient.
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/conv2d_internal.h"
#include "engine/ops/op_utils.h"
#include "engine/precision.h"
#include "kernels/conv2d/conv2d.h"
#include "kernels/conv2d/conv2d_mma.h"

namespace engine {

namespace {

// Which CUDA convolution runs, read when the op runs: cuDNN, ours in strict FP32 (fp32), or ours
// on tensor cores in the policy's precision (tf32, bf16: conv2d_*_tensor_core_cuda).
enum class CudaConv { Cudnn, Ours, OursTensorCore };

CudaConv cuda_conv() {
  if (conv_backend() == ConvBackend::Cudnn) return CudaConv::Cudnn;
  return precision() == Precision::Fp32 ? CudaConv::Ours : CudaConv::OursTensorCore;
}

// The tensor-core convolutions on mma.sync (conv2d_mma_cuda.cu) instead of WMMA: under tf32 or
// bf16 with ENGINE_TC_CONV=mma (engine/backend.h).
bool mma_conv() {
  return precision() != Precision::Fp32 && tensor_core_conv() == TensorCoreConv::Mma;
}

// dw and/or db (either may be undefined) of a CUDA conv. Our wgrad may split its reduction and
// then needs a scratch buffer, taken from the caching allocator for the duration of the call.
void wgrad_cuda(const kernels::Conv2dShape& shape, const Tensor& dy, const Tensor& x, Tensor& dw,
                Tensor& db) {
  float* dw_data = dw.defined() ? dw.data<float>() : nullptr;
  float* db_data = db.defined() ? db.data<float>() : nullptr;
  const CudaConv conv = cuda_conv();
  if (conv == CudaConv::Cudnn) {
    kernels::conv2d_wgrad_cudnn(shape, dy.data<float>(), x.data<float>(), dw_data, db_data,
                                precision());
    return;
  }
  const bool tensor_core = conv == CudaConv::OursTensorCore;
  const bool mma = tensor_core && mma_conv();
  const kernels::ConvTile tile = conv_tile();
  int64_t scratch = 0;
  if (dw.defined() && mma) {
    scratch = kernels::conv2d_wgrad_mma_cuda_workspace_size(shape);
  } else if (dw.defined()) {
    scratch = tensor_core
                  ? kernels::conv2d_wgrad_tensor_core_cuda_workspace_size(shape, precision())
                  : kernels::conv2d_wgrad_cuda_workspace_size(shape, tile);
  }
  Tensor workspace = scratch > 0 ? Tensor::empty({scratch}, DType::F32, dy.device()) : Tensor();
  float* workspace_data = workspace.defined() ? workspace.data<float>() : nullptr;
  if (mma) {
    kernels::conv2d_wgrad_mma_cuda(shape, dy.data<float>(), x.data<float>(), dw_data, db_data,
                                   workspace_data, precision());
  } else if (tensor_core) {
    kernels::conv2d_wgrad_tensor_core_cuda(shape, dy.data<float>(), x.data<float>(), dw_data,
                                           db_data, workspace_data, precision());
  } else {
    kernels::conv2d_wgrad_cuda(shape, dy.data<float>(), x.data<float>(), dw_data, db_data,
                               workspace_data, tile);
  }
}

// The CPU backward (f32) under tf32 or bf16: dgrad and dw multiply rounded copies of their
// operands (dgrad's only outside the first-layer rule, kernels::dgrad_is_first_layer, so that CPU
// and CUDA round the same operands: an attack's input gradient through conv1 stays FP32 on both),
// db sums the unrounded dy in FP32, as the tensor-core kernels' db does.
void cpu_backward_rounded(const kernels::Conv2dShape& shape, const Tensor& dy,
                          const Tensor& x_saved, const Tensor& w_saved,
                          std::vector<Tensor>& grads) {
  const Tensor dy_rounded = detail::cpu_rounded_operand(dy);
  if (grads[0].defined()) {
    const bool fp32 = kernels::dgrad_is_first_layer(shape);
    const Tensor w_operand = fp32 ? w_saved : detail::cpu_rounded_operand(w_saved);
    kernels::conv2d_dgrad_fast_cpu<float>(shape, (fp32 ? dy : dy_rounded).data<float>(),
                                          w_operand.data<float>(), grads[0].data<float>());
  }
  if (grads[1].defined()) {
    const Tensor x_rounded = detail::cpu_rounded_operand(x_saved);
    kernels::conv2d_wgrad_fast_cpu<float>(shape, dy_rounded.data<float>(), x_rounded.data<float>(),
                                          grads[1].data<float>(), nullptr);
  }
  if (grads[2].defined()) {
    kernels::conv2d_wgrad_fast_cpu<float>(shape, dy.data<float>(), x_saved.data<float>(), nullptr,
                                          grads[2].data<float>());
  }
}

}  // namespace

namespace detail {

kernels::Conv2dShape conv2d_shape(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                  const Conv2dOptions& options) {
  check_floating(x, "conv2d", "x");
  check_floating(weight, "conv2d", "weight");
  ENGINE_CHECK(x.dim() == 4, "conv2d: x must be 4-D [N, C, H, W], got shape ",
               shape_str(x.shape()));
  ENGINE_CHECK(weight.dim() == 4, "conv2d: weight must be 4-D [K, C, R, S], got shape ",
               shape_str(weight.shape()));
  check_same_kind(x, weight, "conv2d", "weight");
  ENGINE_CHECK(x.size(1) == weight.size(1), "conv2d: x ", shape_str(x.shape()), " has ", x.size(1),
               " channels but weight ", shape_str(weight.shape()), " expects ", weight.size(1));
  ENGINE_CHECK(weight.numel() > 0, "conv2d: weight ", shape_str(weight.shape()),
               " has a zero-sized dimension");
  if (bias.defined()) {
    check_same_kind(x, bias, "conv2d", "bias");
    ENGINE_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "conv2d: bias must be [",
                 weight.size(0), "] for weight ", shape_str(weight.shape()), ", got ",
                 shape_str(bias.shape()));
  }
  ENGINE_CHECK(options.stride_h >= 1 && options.stride_w >= 1, "conv2d: stride must be >= 1, got ",
               options.stride_h, "x", options.stride_w);
  ENGINE_CHECK(options.pad_h >= 0 && options.pad_w >= 0, "conv2d: padding must be >= 0, got ",
               options.pad_h, "x", options.pad_w);
  ENGINE_CHECK(options.dilation_h >= 1 && options.dilation_w >= 1,
               "conv2d: dilation must be >= 1, got ", options.dilation_h, "x", options.dilation_w);

  kernels::Conv2dShape shape;
  shape.N = x.size(0);
  shape.C = x.size(1);
  shape.H = x.size(2);
  shape.W = x.size(3);
  shape.K = weight.size(0);
  shape.R = weight.size(2);
  shape.S = weight.size(3);
  shape.stride_h = options.stride_h;
  shape.stride_w = options.stride_w;
  shape.pad_h = options.pad_h;
  shape.pad_w = options.pad_w;
  shape.dilation_h = options.dilation_h;
  shape.dilation_w = options.dilation_w;

  // The dilated kernel must fit in the padded input at least once (P, Q >= 1).
  const int64_t span_h = shape.dilation_h * (shape.R - 1) + 1;
  const int64_t span_w = shape.dilation_w * (shape.S - 1) + 1;
  const int64_t padded_h = shape.H + 2 * shape.pad_h, padded_w = shape.W + 2 * shape.pad_w;
  ENGINE_CHECK(span_h <= padded_h && span_w <= padded_w, "conv2d: kernel ", shape.R, "x", shape.S,
               " (", span_h, "x", span_w, " with dilation ", shape.dilation_h, "x",
               shape.dilation_w, ") is larger than the padded input ", padded_h, "x", padded_w,
               " (x ", shape_str(x.shape()), ", weight ", shape_str(weight.shape()), ", padding ",
               shape.pad_h, "x", shape.pad_w, ")");
  return shape;
}

std::vector<Tensor> conv2d_backward(const kernels::Conv2dShape& shape, const Tensor& grad_output,
                                    const Tensor& x_saved, const Tensor& w_saved, bool has_bias,
                                    const std::vector<bool>& needs) {
  std::vector<Tensor> grads(3);
  const bool want_dx = needs[0];
  const bool want_dw = needs[1];
  const bool want_db = has_bias && needs[2];
  if (!want_dx && !want_dw && !want_db) return grads;
  const Tensor dy = grad_output.contiguous();
  const DType dtype = x_saved.dtype();
  const Device device = x_saved.device();
  if (want_dx) grads[0] = Tensor::empty(x_saved.shape(), dtype, device);
  if (want_dw) grads[1] = Tensor::empty(w_saved.shape(), dtype, device);
  if (want_db) grads[2] = Tensor::empty({shape.K}, dtype, device);
  if (device.is_cuda()) {
    const CudaConv conv = want_dx ? cuda_conv() : CudaConv::Ours;
    if (want_dx && conv == CudaConv::Cudnn) {
      kernels::conv2d_dgrad_cudnn(shape, dy.data<float>(), w_saved.data<float>(),
                                  grads[0].data<float>(), precision());
    } else if (want_dx && conv == CudaConv::OursTensorCore && mma_conv()) {
      kernels::conv2d_dgrad_mma_cuda(shape, dy.data<float>(), w_saved.data<float>(),
                                     grads[0].data<float>(), precision());
    } else if (want_dx && conv == CudaConv::OursTensorCore) {
      kernels::conv2d_dgrad_tensor_core_cuda(shape, dy.data<float>(), w_saved.data<float>(),
                                             grads[0].data<float>(), precision());
    } else if (want_dx) {
      kernels::conv2d_dgrad_cuda(shape, dy.data<float>(), w_saved.data<float>(),
                                 grads[0].data<float>(), conv_tile());
    }
    if (want_dw || want_db) wgrad_cuda(shape, dy, x_saved, grads[1], grads[2]);
    return grads;
  }
  if (policy_rounds_operands(dy)) {
    cpu_backward_rounded(shape, dy, x_saved, w_saved, grads);
    return grads;
  }
  dispatch_floating(dtype, "conv2d backward", [&](auto zero) {
    using T = decltype(zero);
    if (want_dx) {
      kernels::conv2d_dgrad_fast_cpu<T>(shape, dy.data<T>(), w_saved.data<T>(), grads[0].data<T>());
    }
    if (want_dw || want_db) {
      kernels::conv2d_wgrad_fast_cpu<T>(shape, dy.data<T>(), x_saved.data<T>(),
                                        want_dw ? grads[1].data<T>() : nullptr,
                                        want_db ? grads[2].data<T>() : nullptr);
    }
  });
  return grads;
}

}  // namespace detail

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv2dOptions& options) {
  const kernels::Conv2dShape shape = detail::conv2d_shape(x, weight, bias, options);
  const Tensor xc = x.contiguous();
  const Tensor wc = weight.contiguous();
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  Tensor y = Tensor::empty({shape.N, shape.K, shape.out_h(), shape.out_w()}, x.dtype(), x.device());
  if (x.device().is_cuda()) {  // CUDA tensors are always f32
    const float* b = bc.defined() ? bc.data<float>() : nullptr;
    const CudaConv conv = cuda_conv();
    if (conv == CudaConv::Cudnn) {
      kernels::conv2d_fprop_cudnn(shape, xc.data<float>(), wc.data<float>(), b, y.data<float>(),
                                  precision());
    } else if (conv == CudaConv::OursTensorCore && mma_conv()) {
      kernels::conv2d_fprop_mma_cuda(shape, xc.data<float>(), wc.data<float>(), b, y.data<float>(),
                                     precision());
    } else if (conv == CudaConv::OursTensorCore) {
      kernels::conv2d_fprop_tensor_core_cuda(shape, xc.data<float>(), wc.data<float>(), b,
                                             y.data<float>(), precision());
    } else {
      kernels::conv2d_fprop_cuda(shape, xc.data<float>(), wc.data<float>(), b, y.data<float>(),
                                 conv_tile());
    }
  } else {
    // Under tf32 and bf16 (f32): rounded copies of x and w, the bias added in FP32.
    const Tensor x_operand = detail::cpu_rounded_operand(xc);
    const Tensor w_operand = detail::cpu_rounded_operand(wc);
    detail::dispatch_floating(x.dtype(), "conv2d", [&](auto zero) {
      using T = decltype(zero);
      kernels::conv2d_fprop_fast_cpu<T>(shape, x_operand.data<T>(), w_operand.data<T>(),
                                        bc.defined() ? bc.data<T>() : nullptr, y.data<T>());
    });
  }
  if (!needs_tape({x, weight, bias})) return y;

  // dgrad needs the weight, wgrad the input; both are saved detached (no reference cycle).
  BackwardFn backward = [shape, x_saved = xc.detach(), w_saved = wc.detach(),
                         has_bias = bias.defined()](const Tensor& grad_output,
                                                    const std::vector<bool>& needs) {
    return detail::conv2d_backward(shape, grad_output, x_saved, w_saved, has_bias, needs);
  };
  return record("conv2d", {x, weight, bias}, y, std::move(backward),
                {{"input", xc}, {"weight", wc}});
}

}  // namespace engine
