// Synchronized batch norm (header: engine/nn/batch_norm_sync.h), composed of differentiable ops
// around one sum over the processes per layer.
#include "engine/nn/batch_norm_sync.h"

#include <limits>
#include <string>
#include <utility>

#include "engine/autograd.h"
#include "kernels/common/check.h"

namespace engine::nn {

namespace {

thread_local BatchNormSync* active_sync = nullptr;

// `local` [K, 2, C] (per branch: sum x, sum x^2) summed over the processes, and the branches'
// counts with it, in one call. Its backward sums the gradient over the processes: every process's
// rows depend on the summed statistics.
Tensor sum_statistics(const Tensor& local, std::vector<double>& counts,
                      const SumOverProcesses& sum_over_processes) {
  std::vector<double> values = local.to_vector();
  const size_t statistics = values.size();
  values.insert(values.end(), counts.begin(), counts.end());
  sum_over_processes(values);
  counts.assign(values.begin() + static_cast<std::ptrdiff_t>(statistics), values.end());
  values.resize(statistics);
  Tensor total = Tensor::from_vector(values, local.shape(), local.dtype(), local.device());
  if (!needs_tape({local})) return total;
  BackwardFn backward = [sum_over_processes](const Tensor& grad_output, const std::vector<bool>&) {
    std::vector<double> grad = grad_output.to_vector();
    sum_over_processes(grad);
    return std::vector<Tensor>{
        Tensor::from_vector(grad, grad_output.shape(), grad_output.dtype(), grad_output.device())};
  };
  return record("batch_norm_sync_sum", {local}, total, std::move(backward));
}

void check_routes(const Tensor& x, const Tensor& weight,
                  const std::vector<BatchNormRoute>& routes) {
  ENGINE_CHECK(x.defined() && (x.dim() == 2 || x.dim() == 4),
               "synchronized batch_norm: x must be [N, C] or [N, C, H, W], got ",
               x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  ENGINE_CHECK(weight.dim() == 2 && weight.size(1) == x.size(1),
               "synchronized batch_norm: weight must be [K, C] with C = ", x.size(1), ", got ",
               shape_str(weight.shape()));
  int64_t expected_begin = 0;
  std::vector<bool> used(static_cast<size_t>(weight.size(0)), false);
  for (const BatchNormRoute& route : routes) {
    ENGINE_CHECK(route.begin == expected_begin && route.end > route.begin && route.branch >= 0 &&
                     route.branch < weight.size(0) && !used[static_cast<size_t>(route.branch)],
                 "synchronized batch_norm: route [", route.begin, ", ", route.end, ") -> ",
                 route.branch, " is not the next non-empty range of rows of a new branch (of ",
                 weight.size(0), ")");
    used[static_cast<size_t>(route.branch)] = true;
    expected_begin = route.end;
  }
  ENGINE_CHECK(expected_begin == x.size(0), "synchronized batch_norm: the routes end at row ",
               expected_begin, " of ", x.size(0));
}

}  // namespace

BatchNormSync::BatchNormSync(SumOverProcesses sum_over_processes)
    : sum_(std::move(sum_over_processes)), previous_(active_sync) {
  active_sync = this;
}
BatchNormSync::~BatchNormSync() { active_sync = previous_; }
const BatchNormSync* BatchNormSync::active() { return active_sync; }

Tensor synchronized_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                               const Tensor& running_mean, const Tensor& running_var,
                               const std::vector<BatchNormRoute>& routes, double momentum,
                               double eps, const BatchNormSync& sync) {
  check_routes(x, weight, routes);
  const int64_t branches = weight.size(0);
  const int64_t channels = x.size(1);
  const bool images = x.dim() == 4;
  const std::vector<int64_t> reduced =
      images ? std::vector<int64_t>{0, 2, 3} : std::vector<int64_t>{0};
  const Shape per_channel = images ? Shape{1, channels, 1, 1} : Shape{1, channels};
  const int64_t values_per_row = images ? x.size(2) * x.size(3) : 1;

  // This process's sum x and sum x^2 per branch (zeros for a branch it routes no rows to).
  std::vector<Tensor> local(static_cast<size_t>(branches));
  std::vector<double> counts(static_cast<size_t>(branches), 0.0);
  for (const BatchNormRoute& route : routes) {
    const Tensor rows = x.slice(0, route.begin, route.end);
    const Tensor sums = concat({sum(rows, reduced), sum(mul(rows, rows), reduced)}, 0);
    local[static_cast<size_t>(route.branch)] = sums.reshape({1, 2, channels});
    counts[static_cast<size_t>(route.branch)] =
        static_cast<double>((route.end - route.begin) * values_per_row);
  }
  for (Tensor& sums : local) {
    if (!sums.defined()) sums = Tensor::zeros({1, 2, channels}, x.dtype(), x.device());
  }
  const Tensor total = sum_statistics(concat(local, 0), counts, sync.sum_over_processes());

  std::vector<Tensor> outputs;
  for (const BatchNormRoute& route : routes) {
    const int64_t k = route.branch;
    const double n = counts[static_cast<size_t>(k)];
    ENGINE_CHECK(n > 1.0,
                 "synchronized batch_norm: training needs more than one value per channel "
                 "in every branch over all processes, branch ",
                 k, " has ", n);
    const Tensor branch_sums = total.select(0, k);  // [2, C]
    const Tensor mean = mul_scalar(branch_sums.select(0, 0), 1.0 / n);
    // The biased variance; rounding can take sum x^2 / n - mean^2 just below 0.
    const Tensor var = clamp(sub(mul_scalar(branch_sums.select(0, 1), 1.0 / n), mul(mean, mean)),
                             0.0, std::numeric_limits<double>::infinity());
    const Tensor invstd = pow(add_scalar(var, eps), -0.5);
    const Tensor xhat = mul(sub(x.slice(0, route.begin, route.end), mean.reshape(per_channel)),
                            invstd.reshape(per_channel));
    outputs.push_back(add(mul(xhat, weight.select(0, k).reshape(per_channel)),
                          bias.select(0, k).reshape(per_channel)));
    NoGradGuard no_grad;  // the running statistics, as engine::batch_norm updates them
    Tensor running_mean_k = running_mean.select(0, k);
    Tensor running_var_k = running_var.select(0, k);
    running_mean_k.copy_(
        add(mul_scalar(running_mean_k, 1.0 - momentum), mul_scalar(mean.detach(), momentum)));
    running_var_k.copy_(add(mul_scalar(running_var_k, 1.0 - momentum),
                            mul_scalar(var.detach(), momentum * n / (n - 1.0))));
  }
  return outputs.size() == 1 ? outputs[0] : concat(outputs, 0);
}

}  // namespace engine::nn
