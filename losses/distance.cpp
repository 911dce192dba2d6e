// Metrics N / E / C and the SPC-2 batch checks (declarations and the why in distance.h).
#include "losses/distance.h"

#include "engine/autograd.h"
#include "engine/ops.h"
#include "kernels/common/check.h"

namespace losses {
namespace {

// PyTorch's pairwise_distance adds eps to the difference before the norm: ||a - b + eps||.
// robrank's triplet, contrastive, margin and lifted losses all measure through it.
constexpr double kRowDistanceEps = 1e-6;

}  // namespace

using engine::Tensor;

double default_margin(Metric metric) { return metric == Metric::E ? 1.0 : 0.2; }

Tensor embed_for_metric(const Tensor& x, Metric metric) {
  return metric == Metric::E ? x : engine::l2_normalize(x);
}

Tensor row_distance(const Tensor& a, const Tensor& b, Metric metric) {
  ENGINE_CHECK(a.defined() && b.defined() && a.dim() == 2 && a.shape() == b.shape(),
               "row_distance: expected a and b of the same shape [T, D], got ",
               a.defined() ? a.str() : "undefined", " and ", b.defined() ? b.str() : "undefined");
  if (metric == Metric::C) {
    // 1 - cos: the dot product of the unit rows.
    Tensor cosine = engine::sum(engine::l2_normalize(a) * engine::l2_normalize(b), {1});
    return engine::add_scalar(engine::neg(cosine), 1.0);
  }
  Tensor diff = (a - b) + kRowDistanceEps;
  return engine::sqrt(engine::sum(diff * diff, {1}));
}

Tensor distance_matrix(const Tensor& x, const Tensor& y, Metric metric) {
  return engine::pairwise_distance(
      x, y,
      metric == Metric::C ? engine::DistanceMetric::Cosine : engine::DistanceMetric::Euclidean);
}

std::vector<double> mining_distances(const Tensor& embeddings, Metric metric) {
  engine::NoGradGuard no_grad;
  Tensor x = embed_for_metric(embeddings.detach(), metric);
  return distance_matrix(x, x, metric).to_vector();
}

std::vector<int64_t> check_labeled_batch(const Tensor& embeddings, const Tensor& labels,
                                         const char* op) {
  ENGINE_CHECK(
      embeddings.defined() && embeddings.dim() == 2 && engine::is_floating(embeddings.dtype()), op,
      ": expected floating-point embeddings [B, D], got ",
      embeddings.defined() ? embeddings.str() : "undefined");
  ENGINE_CHECK(embeddings.size(0) >= 1 && embeddings.size(1) >= 1, op, ": empty embeddings ",
               engine::shape_str(embeddings.shape()));
  ENGINE_CHECK(labels.defined() && labels.dtype() == engine::DType::I64 && labels.dim() == 1 &&
                   labels.size(0) == embeddings.size(0),
               op, ": expected labels i64 [", embeddings.size(0), "] for embeddings ",
               engine::shape_str(embeddings.shape()), ", got ",
               labels.defined() ? labels.str() : "undefined");
  return labels.to_indices();
}

std::vector<int64_t> check_spc2_batch(const Tensor& embeddings, const Tensor& labels,
                                      const char* op) {
  std::vector<int64_t> host = check_labeled_batch(embeddings, labels, op);
  const int64_t batch = embeddings.size(0);
  ENGINE_CHECK(batch % 2 == 0, op,
               ": an SPC-2 batch [a0, p0, a1, p1, ...] needs an even size, got ", batch, " rows");
  for (int64_t i = 0; i < batch; i += 2) {
    ENGINE_CHECK(host[i] == host[i + 1], op, ": SPC-2 batch expects labels[", i, "] == labels[",
                 i + 1, "] (anchor and its partner), got ", host[i], " and ", host[i + 1]);
  }
  return host;
}

}  // namespace losses
