// Triplet loss on rows or index triplets (math in triplet.h).
#include "losses/triplet.h"

#include <cmath>

#include "engine/ops.h"
#include "kernels/common/check.h"

namespace losses {
namespace {

using engine::Tensor;

void check_rows(const Tensor& a, const Tensor& p, const Tensor& n, const char* op) {
  ENGINE_CHECK(a.defined() && p.defined() && n.defined(), op, ": undefined a, p or n");
  ENGINE_CHECK(a.dim() == 2 && a.size(0) >= 1 && p.shape() == a.shape() && n.shape() == a.shape(),
               op,
               ": expected anchors, positives and negatives of one shape [T, D] with T >= 1, got ",
               a.str(), ", ", p.str(), " and ", n.str());
}

void check_index(const Tensor& index, int64_t count, const char* op, const char* what) {
  ENGINE_CHECK(index.defined() && index.dtype() == engine::DType::I64 && index.dim() == 1 &&
                   index.size(0) == count && count >= 1,
               op, ": expected ", what, " indices i64 [", count, "] (T >= 1), got ",
               index.defined() ? index.str() : "undefined");
}

}  // namespace

Tensor triplet_hardness(const Tensor& anchors, const Tensor& positives, const Tensor& negatives,
                        Metric metric) {
  check_rows(anchors, positives, negatives, "triplet_hardness");
  const Tensor a = embed_for_metric(anchors, metric);
  const Tensor p = embed_for_metric(positives, metric);
  const Tensor n = embed_for_metric(negatives, metric);
  return row_distance(a, p, metric) - row_distance(a, n, metric);
}

Tensor triplet_loss_rows(const Tensor& anchors, const Tensor& positives, const Tensor& negatives,
                         Metric metric, double margin) {
  check_rows(anchors, positives, negatives, "triplet_loss");
  ENGINE_CHECK(std::isfinite(margin), "triplet_loss: margin must be finite, got ", margin);
  return engine::mean(
      engine::relu(triplet_hardness(anchors, positives, negatives, metric) + margin));
}

Tensor triplet_loss(const Tensor& embeddings, const Tensor& anchor, const Tensor& positive,
                    const Tensor& negative, Metric metric, double margin) {
  ENGINE_CHECK(embeddings.defined() && embeddings.dim() == 2,
               "triplet_loss: expected embeddings "
               "[B, D], got ",
               embeddings.defined() ? embeddings.str() : "undefined");
  const int64_t count = anchor.defined() ? anchor.numel() : 0;
  check_index(anchor, count, "triplet_loss", "anchor");
  check_index(positive, count, "triplet_loss", "positive");
  check_index(negative, count, "triplet_loss", "negative");
  return triplet_loss_rows(engine::index_select(embeddings, anchor),
                           engine::index_select(embeddings, positive),
                           engine::index_select(embeddings, negative), metric, margin);
}

Tensor triplet_loss(const Tensor& embeddings, const Triplets& triplets, Metric metric,
                    double margin) {
  return triplet_loss(embeddings, triplets.anchor, triplets.positive, triplets.negative, metric,
                      margin);
}

Tensor spc2_triplet_loss(const Tensor& embeddings, const Tensor& labels, Miner miner, Metric metric,
                         engine::Generator& gen) {
  const double margin = default_margin(metric);
  const Triplets triplets = mine_triplets(embeddings, labels, miner, metric, gen, margin);
  return triplet_loss(embeddings, triplets, metric, margin);
}

}  // namespace losses
