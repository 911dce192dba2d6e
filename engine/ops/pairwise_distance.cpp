// pairwise_distance (declaration in engine/ops.h; math in
// kernels/pairwise_distance/pairwise_distance.h): the distance matrix every DML loss, miner and
// retrieval metric starts from. CPU tensors run the fast path (pairwise_distance_*_fast_cpu);
// the reference loops are the oracle in the tests.
#include <utility>
#include <vector>

#include "engine/ops.h"
#include "engine/ops/op_utils.h"
#include "kernels/pairwise_distance/pairwise_distance.h"

namespace engine {
namespace {

// The cosine metric's norm clamp: the same default as l2_normalize, so metric C equals
// 1 - <l2_normalize(a), l2_normalize(b)>.
constexpr double kCosineEps = 1e-12;

kernels::PairwiseMetric kernel_metric(DistanceMetric metric) {
  switch (metric) {
    case DistanceMetric::Euclidean:
      return kernels::PairwiseMetric::Euclidean;
    case DistanceMetric::SquaredEuclidean:
      return kernels::PairwiseMetric::SquaredEuclidean;
    case DistanceMetric::Cosine:
      return kernels::PairwiseMetric::Cosine;
  }
  fail("pairwise_distance: unknown metric ", static_cast<int>(metric));
}

}  // namespace

Tensor pairwise_distance(const Tensor& a, const Tensor& b, DistanceMetric metric) {
  detail::check_defined(a, "pairwise_distance", "a");
  detail::check_defined(b, "pairwise_distance", "b");
  detail::check_floating(a, "pairwise_distance", "a");
  detail::check_same_kind(a, b, "pairwise_distance", "b");
  ENGINE_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(1),
               "pairwise_distance: expected a [N, D] and b [M, D] with the same D, got a ",
               shape_str(a.shape()), " and b ", shape_str(b.shape()));
  const int64_t N = a.size(0), M = b.size(0), D = a.size(1);
  const kernels::PairwiseMetric kmetric = kernel_metric(metric);

  const Tensor ac = a.contiguous(), bc = b.contiguous();
  Tensor out = Tensor::empty({N, M}, a.dtype(), a.device());
  if (a.device().is_cuda()) {
    kernels::pairwise_distance_forward_cuda(ac.data<float>(), bc.data<float>(), N, M, D, kmetric,
                                            float(kCosineEps), out.data<float>());
  } else {
    detail::dispatch_floating(a.dtype(), "pairwise_distance", [&](auto zero) {
      using T = decltype(zero);
      kernels::pairwise_distance_forward_fast_cpu<T>(ac.data<T>(), bc.data<T>(), N, M, D, kmetric,
                                                     T(kCosineEps), out.data<T>());
    });
  }
  if (!needs_tape({a, b})) return out;

  BackwardFn backward = [a_saved = ac.detach(), b_saved = bc.detach(), kmetric](
                            const Tensor& grad_output, const std::vector<bool>& needs) {
    const Tensor g = grad_output.contiguous();
    Tensor da, db;
    if (needs[0]) da = Tensor::empty(a_saved.shape(), a_saved.dtype(), a_saved.device());
    if (needs[1]) db = Tensor::empty(b_saved.shape(), b_saved.dtype(), b_saved.device());
    if (g.device().is_cuda()) {
      kernels::pairwise_distance_backward_cuda(
          g.data<float>(), a_saved.data<float>(), b_saved.data<float>(), a_saved.size(0),
          b_saved.size(0), a_saved.size(1), kmetric, float(kCosineEps),
          needs[0] ? da.data<float>() : nullptr, needs[1] ? db.data<float>() : nullptr);
      return std::vector<Tensor>{da, db};
    }
    detail::dispatch_floating(g.dtype(), "pairwise_distance backward", [&](auto zero) {
      using T = decltype(zero);
      kernels::pairwise_distance_backward_fast_cpu<T>(
          g.data<T>(), a_saved.data<T>(), b_saved.data<T>(), a_saved.size(0), b_saved.size(0),
          a_saved.size(1), kmetric, T(kCosineEps), needs[0] ? da.data<T>() : nullptr,
          needs[1] ? db.data<T>() : nullptr);
    });
    return std::vector<Tensor>{da, db};
  };
  return record("pairwise_distance", {a, b}, out, std::move(backward),
                {{"first operand", ac}, {"second operand", bc}});
}

}  // namespace engine
