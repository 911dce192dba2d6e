// Subset reductions for the DML losses (math in masked.h).
#include "losses/masked.h"

#include <limits>

#include "engine/ops.h"
#include "kernels/common/check.h"

namespace losses::detail {

using engine::Tensor;

Tensor log1p_sum_exp(const Tensor& z, const std::vector<uint8_t>& member) {
  ENGINE_CHECK(z.defined() && z.dim() == 2, "log1p_sum_exp: expected z [R, C], got ",
               z.defined() ? z.str() : "undefined");
  const int64_t rows = z.size(0), cols = z.size(1);
  ENGINE_CHECK(static_cast<int64_t>(member.size()) == rows * cols, "log1p_sum_exp: mask has ",
               member.size(), " entries for z ", engine::shape_str(z.shape()));
  std::vector<double> bias(member.size());
  for (size_t k = 0; k < member.size(); ++k)
    bias[k] = member[k] ? 0.0 : -std::numeric_limits<double>::infinity();
  const Tensor masked = z + Tensor::from_vector(bias, {rows, cols}, z.dtype(), z.device());
  // The leading 0 column is the "1 +": log(e^0 + sum exp(z)).
  const Tensor one = Tensor::zeros({rows, 1}, z.dtype(), z.device());
  return engine::logsumexp(engine::concat({one, masked}, 1), 1);
}

Tensor active_mean(const Tensor& hinge) {
  ENGINE_CHECK(hinge.defined() && hinge.dim() == 1, "active_mean: expected a vector, got ",
               hinge.defined() ? hinge.str() : "undefined");
  int64_t active = 0;
  for (double v : hinge.to_vector())
    if (v > 0.0) ++active;
  // With no active term the sum is 0 (and so is its gradient): 0 / 1.
  return engine::sum(hinge) * (1.0 / static_cast<double>(active > 0 ? active : 1));
}

Tensor row_norms(const Tensor& x) {
  // The distance to the origin: engine::pairwise_distance defines the gradient at 0 as 0.
  const Tensor origin = Tensor::zeros({1, x.size(1)}, x.dtype(), x.device());
  return engine::pairwise_distance(x, origin, engine::DistanceMetric::Euclidean).reshape({-1});
}

}  // namespace losses::detail
