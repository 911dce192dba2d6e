// SPC-2 triplet mining on tensors (miners.h): the rules run on the host
// (kernels/triplet/triplet_mining.h) over the B x B mining distance matrix; the batch is a few
// hundred rows at most.
#include "losses/miners.h"

#include <cmath>
#include <vector>

#include "kernels/common/check.h"

namespace losses {

using engine::Tensor;

Triplets mine_triplets(const Tensor& embeddings, const Tensor& labels, Miner miner, Metric metric,
                       engine::Generator& gen, double margin) {
  const std::vector<int64_t> host_labels = check_spc2_batch(embeddings, labels, "mine_triplets");
  ENGINE_CHECK(std::isfinite(margin), "mine_triplets: margin must be finite, got ", margin);
  const int64_t batch = embeddings.size(0), pairs = batch / 2, dim = embeddings.size(1);
  const std::vector<double> dist = mining_distances(embeddings, metric);
  const std::vector<double> draws =
      engine::uniform({pairs * engine::kernels::kMiningDrawsPerAnchor}, 0.0, 1.0, gen,
                      engine::DType::F64)
          .to_vector();

  std::vector<int64_t> anchor(static_cast<size_t>(pairs)), positive(anchor.size()),
      negative(anchor.size());
  std::vector<double> hardness(anchor.size());
  engine::kernels::mine_triplets_cpu(dist.data(), host_labels.data(), batch, dim, miner, margin,
                                     draws.data(), anchor.data(), positive.data(), negative.data(),
                                     hardness.data());

  const engine::Device device = embeddings.device();
  Triplets out;
  out.anchor = Tensor::from_indices(anchor, {pairs}, device);
  out.positive = Tensor::from_indices(positive, {pairs}, device);
  out.negative = Tensor::from_indices(negative, {pairs}, device);
  out.hardness = Tensor::from_vector(hardness, {pairs}, embeddings.dtype(), device);
  return out;
}

Triplets mine_triplets(const Tensor& embeddings, const Tensor& labels, Miner miner, Metric metric,
                       engine::Generator& gen) {
  return mine_triplets(embeddings, labels, miner, metric, gen, default_margin(metric));
}

}  // namespace losses
