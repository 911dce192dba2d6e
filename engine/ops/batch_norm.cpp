// batch_norm with K branches (declaration and contract in engine/ops.h; math in
// kernels/batch_norm/batch_norm.h). The routing table decides, per contiguous range of batch rows,
// which branch's statistics and affine parameters apply — MDProp's clean / STAX / MTAX groups.
#include <string>
#include <utility>
#include <vector>

#include "engine/ops.h"
#include "engine/ops/op_utils.h"
#include "kernels/batch_norm/batch_norm.h"

namespace engine {
namespace {

std::string routes_str(const std::vector<BatchNormRoute>& routes) {
  std::string text = "{";
  for (size_t r = 0; r < routes.size(); ++r) {
    if (r > 0) text += ", ";
    text += "[" + std::to_string(routes[r].begin) + ", " + std::to_string(routes[r].end) + ") -> " +
            std::to_string(routes[r].branch);
  }
  return text + "}";
}

// weight, bias, running_mean, running_var: [K, C], same dtype and device as x.
void check_param(const Tensor& x, const Tensor& param, const char* arg, int64_t C, int64_t K) {
  detail::check_defined(param, "batch_norm", arg);
  detail::check_same_kind(x, param, "batch_norm", arg);
  ENGINE_CHECK(param.dim() == 2 && param.size(0) == K && param.size(1) == C, "batch_norm: ", arg,
               " must be [K, C] = [", K, ", ", C, "] (x ", shape_str(x.shape()),
               ", weight [K, C]), got ", shape_str(param.shape()));
}

// Validates every argument and builds the kernels' routing table.
kernels::BatchNormShape make_shape(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   const Tensor& running_mean, const Tensor& running_var,
                                   const std::vector<BatchNormRoute>& routes, bool training,
                                   double momentum, double eps) {
  detail::check_defined(x, "batch_norm", "x");
  detail::check_floating(x, "batch_norm", "x");
  ENGINE_CHECK(x.device().is_cpu() || x.dtype() == DType::F32,
               "batch_norm: CUDA tensors must be f32, got x ", x.str());
  ENGINE_CHECK(x.dim() == 2 || x.dim() == 4,
               "batch_norm: x must be [N, C] (batch_norm1d) or [N, C, H, W] (batch_norm2d), got ",
               shape_str(x.shape()));
  kernels::BatchNormShape shape;
  shape.N = x.size(0);
  shape.C = x.size(1);
  shape.HW = x.dim() == 4 ? x.size(2) * x.size(3) : 1;

  detail::check_defined(weight, "batch_norm", "weight");
  ENGINE_CHECK(weight.dim() == 2 && weight.size(0) >= 1,
               "batch_norm: weight must be [K, C] with K >= 1 branches, got ",
               shape_str(weight.shape()));
  shape.K = weight.size(0);
  check_param(x, weight, "weight", shape.C, shape.K);
  check_param(x, bias, "bias", shape.C, shape.K);
  check_param(x, running_mean, "running_mean", shape.C, shape.K);
  check_param(x, running_var, "running_var", shape.C, shape.K);
  // The running statistics are updated in place: a copy would silently drop the update.
  ENGINE_CHECK(running_mean.is_contiguous() && running_var.is_contiguous(),
               "batch_norm: running_mean and running_var must be contiguous (updated in place)");
  ENGINE_CHECK(eps > 0.0, "batch_norm: eps must be positive, got ", eps);
  ENGINE_CHECK(momentum >= 0.0 && momentum <= 1.0, "batch_norm: momentum must be in [0, 1], got ",
               momentum);

  ENGINE_CHECK(!routes.empty() && shape.N > 0, "batch_norm: routes ", routes_str(routes),
               " must cover the batch [0, ", shape.N, ") with at least one non-empty route");
  ENGINE_CHECK(routes.size() <= size_t(kernels::kMaxBatchNormRoutes), "batch_norm: ", routes.size(),
               " routes, at most ", kernels::kMaxBatchNormRoutes, " supported");
  std::vector<bool> branch_used(shape.K, false);
  int64_t expected_begin = 0;
  for (const BatchNormRoute& route : routes) {
    // Rows [0, expected_begin) are covered so far; the next route must start right there.
    ENGINE_CHECK(route.begin == expected_begin && route.end > route.begin, "batch_norm: routes ",
                 routes_str(routes), " must be non-empty, in order and contiguous from row 0 ",
                 "(expected a route starting at row ", expected_begin, ")");
    ENGINE_CHECK(route.branch >= 0 && route.branch < shape.K, "batch_norm: route [", route.begin,
                 ", ", route.end, ") names branch ", route.branch, " but there are ", shape.K,
                 " branches (weight ", shape_str(weight.shape()), ")");
    ENGINE_CHECK(!branch_used[route.branch], "batch_norm: routes ", routes_str(routes),
                 " name branch ", route.branch, " more than once");
    branch_used[route.branch] = true;
    const int64_t count = (route.end - route.begin) * shape.HW;
    ENGINE_CHECK(!training || count > 1,
                 "batch_norm: training needs more than one value per channel in every route, ",
                 "but route [", route.begin, ", ", route.end, ") of x ", shape_str(x.shape()),
                 " has ", count);
    const int r = shape.num_routes++;
    shape.route_begin[r] = route.begin;
    shape.route_end[r] = route.end;
    shape.route_branch[r] = route.branch;
    expected_begin = route.end;
  }
  ENGINE_CHECK(expected_begin == shape.N, "batch_norm: routes ", routes_str(routes), " end at row ",
               expected_begin, " but the batch has ", shape.N, " rows (x ", shape_str(x.shape()),
               ")");
  return shape;
}

}  // namespace

std::vector<BatchNormRoute> single_branch_route(int64_t batch, int64_t branch) {
  ENGINE_CHECK(batch > 0, "single_branch_route: batch must be positive, got ", batch);
  ENGINE_CHECK(branch >= 0, "single_branch_route: branch must be >= 0, got ", branch);
  return {BatchNormRoute{0, batch, branch}};
}

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var,
                  const std::vector<BatchNormRoute>& routes, bool training, double momentum,
                  double eps) {
  const kernels::BatchNormShape shape =
      make_shape(x, weight, bias, running_mean, running_var, routes, training, momentum, eps);
  const Tensor xc = x.contiguous();
  const Tensor wc = weight.contiguous();
  const Tensor bc = bias.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  // Per (route, channel): the mean and 1/sqrt(var + eps) actually used, for the backward.
  Tensor save_mean = Tensor::empty({shape.num_routes, shape.C}, x.dtype(), x.device());
  Tensor save_invstd = Tensor::empty({shape.num_routes, shape.C}, x.dtype(), x.device());

  if (x.device().is_cuda()) {
    if (training) {
      kernels::batch_norm_forward_train_cuda(
          shape, xc.data<float>(), wc.data<float>(), bc.data<float>(), float(momentum), float(eps),
          y.data<float>(), save_mean.data<float>(), save_invstd.data<float>(),
          running_mean.data<float>(), running_var.data<float>());
    } else {
      kernels::batch_norm_forward_eval_cuda(shape, xc.data<float>(), wc.data<float>(),
                                            bc.data<float>(), running_mean.data<float>(),
                                            running_var.data<float>(), float(eps), y.data<float>(),
                                            save_mean.data<float>(), save_invstd.data<float>());
    }
  } else {
    detail::dispatch_floating(x.dtype(), "batch_norm", [&](auto zero) {
      using T = decltype(zero);
      if (training) {
        kernels::batch_norm_forward_train_cpu<T>(shape, xc.data<T>(), wc.data<T>(), bc.data<T>(),
                                                 T(momentum), T(eps), y.data<T>(),
                                                 save_mean.data<T>(), save_invstd.data<T>(),
                                                 running_mean.data<T>(), running_var.data<T>());
      } else {
        kernels::batch_norm_forward_eval_cpu<T>(
            shape, xc.data<T>(), wc.data<T>(), bc.data<T>(), running_mean.data<T>(),
            running_var.data<T>(), T(eps), y.data<T>(), save_mean.data<T>(), save_invstd.data<T>());
      }
    });
  }
  if (!needs_tape({x, weight, bias})) return y;

  BackwardFn backward = [shape, training, x_saved = xc.detach(), w_saved = wc.detach(), save_mean,
                         save_invstd](const Tensor& grad_output, const std::vector<bool>& needs) {
    const Tensor dy = grad_output.contiguous();
    Tensor dx, dweight, dbias;
    if (needs[0]) dx = Tensor::empty(x_saved.shape(), x_saved.dtype(), x_saved.device());
    if (needs[1]) dweight = Tensor::empty(w_saved.shape(), w_saved.dtype(), w_saved.device());
    if (needs[2]) dbias = Tensor::empty(w_saved.shape(), w_saved.dtype(), w_saved.device());
    if (dy.device().is_cuda()) {
      // The CUDA dx pass in training reads sum(dy) and sum(dy xhat) back from dbias/dweight, so
      // both are computed whenever dx is, and dropped below when not asked for ([K, C]: cheap).
      Tensor sum_dy_xhat = dweight, sum_dy = dbias;
      if (needs[0] && training) {
        if (!needs[1]) sum_dy_xhat = Tensor::empty(w_saved.shape(), DType::F32, w_saved.device());
        if (!needs[2]) sum_dy = Tensor::empty(w_saved.shape(), DType::F32, w_saved.device());
      }
      kernels::batch_norm_backward_cuda(
          shape, training, dy.data<float>(), x_saved.data<float>(), w_saved.data<float>(),
          save_mean.data<float>(), save_invstd.data<float>(), needs[0] ? dx.data<float>() : nullptr,
          sum_dy_xhat.defined() ? sum_dy_xhat.data<float>() : nullptr,
          sum_dy.defined() ? sum_dy.data<float>() : nullptr);
    } else {
      detail::dispatch_floating(dy.dtype(), "batch_norm backward", [&](auto zero) {
        using T = decltype(zero);
        kernels::batch_norm_backward_cpu<T>(
            shape, training, dy.data<T>(), x_saved.data<T>(), w_saved.data<T>(),
            save_mean.data<T>(), save_invstd.data<T>(), needs[0] ? dx.data<T>() : nullptr,
            needs[1] ? dweight.data<T>() : nullptr, needs[2] ? dbias.data<T>() : nullptr);
      });
    }
    return std::vector<Tensor>{dx, dweight, dbias};
  };
  return record("batch_norm", {x, weight, bias}, y, std::move(backward),
                {{"input", xc}, {"weight", wc}});
}

}  // namespace engine
