// CUDA vs CPU for every loss and miner. The losses are compositions of engine ops, so on a CUDA
// tensor they run the ops' CUDA kernels; these tests check value and input gradient (f32) against
// the CPU reference on the same data, within tests/support/tolerance.h.
#include <catch2/catch.hpp>

#include <functional>
#include <vector>

#include "engine/autograd.h"
#include "engine/device.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "losses/losses.h"
#include "tests/losses/helpers.h"
#include "tests/support/allclose.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tolerance.h"

using engine::Device;
using engine::Tensor;
using losses::Metric;
using losses_test::labels_of;

namespace {

const Device kCuda = Device::cuda();

using LossFn = std::function<Tensor(const Tensor& embeddings, const Tensor& labels)>;

// Runs `loss` on the same f32 embeddings on the CPU and on the GPU and compares the values and
// the embeddings' gradients. Reductions over the batch and D: tolerance for length B * D.
void require_cuda_matches_cpu(const LossFn& loss, int64_t batch, int64_t dim,
                              const std::vector<int64_t>& labels, uint64_t seed) {
  engine::Generator gen(seed);
  Tensor host = engine::normal({batch, dim}, 0.0, 1.0, gen);
  Tensor device = host.to(kCuda);
  host.set_requires_grad(true);
  device.set_requires_grad(true);
  Tensor host_loss = loss(host, labels_of(labels));
  Tensor device_loss = loss(device, labels_of(labels).to(kCuda));
  REQUIRE(device_loss.device().is_cuda());
  const test::Tolerance tol = test::reduction_tolerance(batch * dim);
  test::require_close(device_loss.to(Device::cpu()), host_loss, tol.atol, tol.rtol, "value");
  Tensor host_grad = engine::grad({host_loss}, {host})[0];
  Tensor device_grad = engine::grad({device_loss}, {device})[0];
  test::require_close(device_grad.to(Device::cpu()), host_grad, tol.atol, tol.rtol, "gradient");
}

// Fixed triplets (random miner: labels only) so both devices see the same ones.
losses::Triplets fixed_triplets(const Tensor& embeddings, const Tensor& labels) {
  engine::Generator gen(17);
  return losses::mine_triplets(embeddings, labels, losses::Miner::Random, Metric::N, gen);
}

const std::vector<int64_t> kLabels = losses_test::spc2_labels(16, 5);

}  // namespace

TEST_CASE("triplet loss cuda: matches cpu for N, E and C", "[losses][triplet][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    require_cuda_matches_cpu(
        [metric](const Tensor& x, const Tensor& y) {
          return losses::triplet_loss(x, fixed_triplets(x, y), metric,
                                      losses::default_margin(metric) + 1.0);
        },
        32, 16, kLabels, 1);
  }
}

TEST_CASE("miners cuda: same triplets and hardness as cpu", "[losses][miners][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  engine::Generator data_gen(2);
  Tensor host = engine::normal({32, 16}, 0.0, 1.0, data_gen);
  // The hardness d(a,p) - d(a,n) is a difference of two f32 distances over D = 16 of up to ~8
  // (metric E on N(0, 1) rows: |x - y| is about sqrt(2 * 16) = 5.7), so its absolute error
  // scales with that magnitude, not with the (possibly tiny) difference.
  const test::Tolerance tol = test::reduction_tolerance(16, 8.0);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    for (losses::Miner miner :
         {losses::Miner::Random, losses::Miner::Semihard, losses::Miner::Softhard,
          losses::Miner::Distance, losses::Miner::Hardest}) {
      INFO("metric " << losses::metric_name(metric) << ", miner " << losses::miner_name(miner));
      engine::Generator g_host(3), g_device(3);
      losses::Triplets a = losses::mine_triplets(host, labels_of(kLabels), miner, metric, g_host);
      losses::Triplets b =
          losses::mine_triplets(host.to(kCuda), labels_of(kLabels), miner, metric, g_device);
      REQUIRE(b.negative.device().is_cuda());
      CHECK(a.anchor.to_indices() == b.anchor.to_indices());
      CHECK(a.positive.to_indices() == b.positive.to_indices());
      CHECK(a.negative.to_indices() == b.negative.to_indices());
      test::require_close(b.hardness.to(Device::cpu()), a.hardness, tol.atol, tol.rtol, "hardness");
    }
  }
}

TEST_CASE("contrastive loss cuda: matches cpu", "[losses][contrastive][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    require_cuda_matches_cpu(
        [metric](const Tensor& x, const Tensor& y) {
          return losses::contrastive_loss(x, fixed_triplets(x, y), metric, 0.5);
        },
        32, 16, kLabels, 4);
  }
}

TEST_CASE("margin loss cuda: matches cpu for N, E and C", "[losses][margin][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    losses::MarginLoss host_loss(metric), device_loss(metric);
    device_loss.to(kCuda);
    require_cuda_matches_cpu(
        [&](const Tensor& x, const Tensor& y) {
          return (x.device().is_cuda() ? device_loss : host_loss).loss(x, fixed_triplets(x, y));
        },
        32, 16, kLabels, 5);
  }
}

TEST_CASE("multi-similarity loss cuda: matches cpu", "[losses][multi_similarity][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  require_cuda_matches_cpu(
      [](const Tensor& x, const Tensor& y) { return losses::multi_similarity_loss(x, y); }, 32, 16,
      kLabels, 6);
}

TEST_CASE("arcface loss cuda: matches cpu", "[losses][arcface][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  engine::Generator g1(7), g2(7);
  losses::ArcFaceLoss host_loss(5, 16, g1), device_loss(5, 16, g2);
  device_loss.to(kCuda);
  require_cuda_matches_cpu(
      [&](const Tensor& x, const Tensor& y) {
        return (x.device().is_cuda() ? device_loss : host_loss).loss(x, y);
      },
      32, 16, kLabels, 8);
}

TEST_CASE("lifted and npair losses cuda: match cpu", "[losses][lifted][npair][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    require_cuda_matches_cpu(
        [metric](const Tensor& x, const Tensor& y) { return losses::lifted_loss(x, y, metric); },
        32, 16, kLabels, 9);
    require_cuda_matches_cpu(
        [metric](const Tensor& x, const Tensor& y) { return losses::npair_loss(x, y, metric); }, 32,
        16, kLabels, 10);
  }
}

TEST_CASE("ics loss cuda: matches cpu", "[losses][ics][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // Rows 0..9 clean anchors, 10..19 adversarial anchors, 20..29 clean positives.
  require_cuda_matches_cpu(
      [](const Tensor& x, const Tensor&) {
        return losses::ics_loss(x.slice(0, 0, 10), x.slice(0, 10, 20), x.slice(0, 20, 30));
      },
      30, 16, std::vector<int64_t>(30, 0), 11);
}
