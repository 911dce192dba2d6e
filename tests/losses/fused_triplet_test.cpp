// The fused SPC-2 triplet loss (losses/fused_triplet.h, kernels/triplet): hand-computed batches,
// the CPU twin against the composition it replaces (losses::mine_triplets + losses::triplet_loss)
// for every miner and metric, f64 finite differences, the autograd node, bad input, and CUDA
// against the CPU twin over a sweep of shapes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/autograd.h"
#include "engine/device.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "losses/fused_triplet.h"
#include "losses/miners.h"
#include "losses/triplet.h"
#include "tests/losses/helpers.h"
#include "tests/support/allclose.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tolerance.h"

using engine::Device;
using engine::Tensor;
using losses::Metric;
using losses::Miner;
using losses_test::f64;
using losses_test::kAllMetrics;
using losses_test::kAllMiners;
using losses_test::labels_of;

namespace {

// What one path produced: loss, dL/dx, triplets and the generator's offset afterwards.
struct Outcome {
  Tensor loss;
  Tensor grad;
  losses::Triplets triplets;
  uint64_t offset_after = 0;
};

// The composition the fused path replaces, differentiated by autograd.
Outcome composed(const Tensor& x, const Tensor& labels, Miner miner, Metric metric, uint64_t seed,
                 double margin) {
  Tensor leaf = x.detach().clone();
  leaf.set_requires_grad(true);
  engine::Generator gen(seed);
  losses::Triplets triplets = losses::mine_triplets(leaf, labels, miner, metric, gen, margin);
  Tensor loss = losses::triplet_loss(leaf, triplets, metric, margin);
  engine::backward(loss);
  return {loss.detach(), leaf.grad(), triplets, gen.offset};
}

Outcome fused(const Tensor& x, const Tensor& labels, Miner miner, Metric metric, uint64_t seed,
              double margin) {
  Tensor leaf = x.detach().clone();
  leaf.set_requires_grad(true);
  engine::Generator gen(seed);
  losses::FusedTriplet out = losses::spc2_triplet_fused(leaf, labels, miner, metric, gen, margin);
  engine::backward(out.loss);
  return {out.loss.detach(), leaf.grad(), out.triplets, gen.offset};
}

// Triplets must be identical; hardness too (both are d(a,p) - d(a,n) of the same f64 copies of
// the same mining distances).
void require_same_triplets(const losses::Triplets& got, const losses::Triplets& expected) {
  CHECK(got.anchor.to_indices() == expected.anchor.to_indices());
  CHECK(got.positive.to_indices() == expected.positive.to_indices());
  CHECK(got.negative.to_indices() == expected.negative.to_indices());
  CHECK(got.hardness.to_vector() == expected.hardness.to_vector());
  CHECK(got.hardness.dtype() == expected.hardness.dtype());
}

Tensor random_batch(int64_t batch, int64_t dim, engine::DType dtype, uint64_t seed) {
  engine::Generator gen(seed);
  return engine::normal({batch, dim}, 0.0, 1.0, gen, dtype);
}

}  // namespace

TEST_CASE("fused triplet: hand-computed batch, metric E, hardest miner",
          "[losses][fused_triplet]") {
  // 1-D rows x = 0, 1 (class A), 3, 2.5 (class B); margin 2.
  // Anchor 0: negatives 3 (d 3) and 2.5 (d 2.5) -> row 3. Anchor 2 (x = 3): negatives 0 (d 3) and
  //   1 (d 2) -> row 1. Hardness 1 - 2.5 = -1.5 and 0.5 - 2 = -1.5.
  // Loss distances |a - b + 1e-6|: h0 = (1 - 1e-6) - (2.5 - 1e-6) + 2 = 0.5,
  //   h1 = (0.5 + 1e-6) - (2 + 1e-6) + 2 = 0.5; L = 0.5.
  // Gradient (D = 1: u/|u| = sign u), each triplet scaled 1/2: row 0 (-1 - -1)/2 = 0,
  //   row 1 +1/2 (positive of t0) + 1/2 (negative of t1) = 1, row 2 (1 - 1)/2 = 0,
  //   row 3 -1/2 (negative of t0) - 1/2 (positive of t1) = -1.
  Tensor x = f64({0.0, 1.0, 3.0, 2.5}, {4, 1});
  const Outcome out = fused(x, labels_of({0, 0, 1, 1}), Miner::Hardest, Metric::E, 1, 2.0);
  CHECK(out.triplets.anchor.to_indices() == std::vector<int64_t>{0, 2});
  CHECK(out.triplets.positive.to_indices() == std::vector<int64_t>{1, 3});
  CHECK(out.triplets.negative.to_indices() == std::vector<int64_t>{3, 1});
  test::require_close(out.triplets.hardness, {-1.5, -1.5}, 1e-12, 0.0, "hardness");
  REQUIRE(out.loss.shape() == engine::Shape{});
  CHECK(out.loss.item() == Approx(0.5).margin(1e-12));
  test::require_close(out.grad, {0.0, 1.0, 0.0, -1.0}, 1e-12, 0.0, "gradient");
}

TEST_CASE("fused triplet: hand-computed batch, metric N, hardest miner",
          "[losses][fused_triplet]") {
  // Rows (1,0), (0,2) class A; (-1,0), (0,-1) class B. Normalized: y1 = (0,1), the rest as given.
  // Anchor 0: d to row 2 = 2, to row 3 = sqrt 2 -> negative 3. Anchor 2: d to row 0 = 2, to
  //   row 1 = sqrt 2 -> negative 1. Every d(a,p) and d(a,n) is sqrt 2: hardness 0, 0.
  // Loss (margin 0.2): t0 u = y0 - y1 = (1,-1), v = y0 - y3 = (1,1); t1 u = (-1,1), v = (-1,-1):
  //   h = sqrt 2 - sqrt 2 + 0.2 each (the 1e-6 shifts cancel to first order in the mean): 0.2.
  // Gradient wrt y, scaled 1/2: t0 anchor (u/|u| - v/|v|)/2 = (0, -1/sqrt 2), positive
  //   -(1,-1)/(2 sqrt 2), negative (1,1)/(2 sqrt 2); t1 anchor (0, 1/sqrt 2), positive
  //   -(-1,1)/(2 sqrt 2), negative (-1,-1)/(2 sqrt 2). Row 1 sums to (-1/sqrt 2, 0), row 3 to
  //   (1/sqrt 2, 0). Every row's sum is orthogonal to its y, so l2_normalize's backward only
  //   divides by |x|: row 1 by 2.
  Tensor x = f64({1, 0, 0, 2, -1, 0, 0, -1}, {4, 2});
  const Outcome out = fused(x, labels_of({0, 0, 1, 1}), Miner::Hardest, Metric::N, 1, 0.2);
  CHECK(out.triplets.positive.to_indices() == std::vector<int64_t>{1, 3});
  CHECK(out.triplets.negative.to_indices() == std::vector<int64_t>{3, 1});
  test::require_close(out.triplets.hardness, {0.0, 0.0}, 1e-12, 0.0, "hardness");
  CHECK(out.loss.item() == Approx(0.2).margin(1e-10));
  const double r = 1.0 / std::sqrt(2.0);
  // The 1e-6 shifts move the gradient by O(1e-6).
  test::require_close(out.grad, {0, -r, -r / 2, 0, 0, r, r, 0}, 1e-5, 0.0, "gradient");
}

TEST_CASE("fused triplet: cpu twin equals mine_triplets + triplet_loss for every miner and metric",
          "[losses][fused_triplet]") {
  struct Case {
    int64_t pairs, dim, classes;
  };
  // Odd P and odd D; one class (no negatives: the fallbacks), every pair its own class, D = 1
  // (metric N and C: all distances 0 or 2, so ties everywhere).
  const Case cases[] = {{1, 3, 1}, {3, 1, 2}, {7, 5, 3}, {7, 33, 7}, {16, 8, 5}, {5, 4, 1}};
  for (const Case& c : cases) {
    const Tensor labels = labels_of(losses_test::spc2_labels(c.pairs, c.classes));
    for (engine::DType dtype : {engine::DType::F64, engine::DType::F32}) {
      const Tensor x = random_batch(2 * c.pairs, c.dim, dtype, 100 + c.pairs * 7 + c.dim);
      // f64: both paths are exact to ~1e-15; f32: the composition rounds every op to f32 while
      // the twin accumulates in f64 (reductions over D).
      const test::Tolerance tol = dtype == engine::DType::F64
                                      ? test::Tolerance{1e-10, 1e-10}
                                      : test::reduction_tolerance(c.dim * 2 * c.pairs);
      for (Miner miner : kAllMiners) {
        for (Metric metric : kAllMetrics) {
          INFO("P " << c.pairs << " D " << c.dim << " classes " << c.classes << " "
                    << engine::dtype_name(dtype) << " miner " << losses::miner_name(miner)
                    << " metric " << losses::metric_name(metric));
          const double margin = losses::default_margin(metric);
          const Outcome expected = composed(x, labels, miner, metric, 42, margin);
          const Outcome got = fused(x, labels, miner, metric, 42, margin);
          require_same_triplets(got.triplets, expected.triplets);
          CHECK(got.offset_after == expected.offset_after);
          CHECK(got.loss.dtype() == dtype);
          test::require_close(got.loss, expected.loss, tol.atol, tol.rtol, "loss");
          test::require_close(got.grad, expected.grad, tol.atol, tol.rtol, "gradient");
        }
      }
    }
  }
}

TEST_CASE("fused triplet: a wide margin keeps every hinge active (the gradient is never empty)",
          "[losses][fused_triplet]") {
  // Margin 10: every triplet contributes, so the comparison covers the full gradient.
  const Tensor x = random_batch(22, 9, engine::DType::F64, 5);
  const Tensor labels = labels_of(losses_test::spc2_labels(11, 4));
  for (Miner miner : kAllMiners) {
    for (Metric metric : kAllMetrics) {
      INFO("miner " << losses::miner_name(miner) << " metric " << losses::metric_name(metric));
      const Outcome expected = composed(x, labels, miner, metric, 3, 10.0);
      const Outcome got = fused(x, labels, miner, metric, 3, 10.0);
      require_same_triplets(got.triplets, expected.triplets);
      CHECK(got.loss.item() > 5.0);
      test::require_close(got.loss, expected.loss, 1e-10, 1e-10, "loss");
      test::require_close(got.grad, expected.grad, 1e-10, 1e-10, "gradient");
    }
  }
}

TEST_CASE("fused triplet grad: matches finite differences (f64)", "[losses][fused_triplet]") {
  const Tensor labels = labels_of(losses_test::spc2_labels(4, 2));
  for (Miner miner : kAllMiners) {
    for (Metric metric : kAllMetrics) {
      INFO("miner " << losses::miner_name(miner) << " metric " << losses::metric_name(metric));
      Tensor x = test::random_leaf({8, 5}, 11);
      // A fresh generator per call: every evaluation mines with the same uniforms.
      test::require_gradcheck(
          [&](const std::vector<Tensor>& in) {
            engine::Generator gen(9);
            return losses::spc2_triplet_loss_fused(in[0], labels, miner, metric, gen, 0.5);
          },
          {x});
    }
  }
}

TEST_CASE("fused triplet: backward scales the stored gradient by grad_output",
          "[losses][fused_triplet]") {
  const Tensor labels = labels_of(losses_test::spc2_labels(5, 3));
  Tensor x = test::random_leaf({10, 6}, 21);
  engine::Generator gen_a(4), gen_b(4);
  Tensor loss = losses::spc2_triplet_loss_fused(x, labels, Miner::Semihard, Metric::N, gen_a, 1.0);
  const Tensor once = engine::grad({loss}, {x})[0];
  Tensor loss_b =
      losses::spc2_triplet_loss_fused(x, labels, Miner::Semihard, Metric::N, gen_b, 1.0);
  const Tensor tripled = engine::grad({engine::mul_scalar(loss_b, 3.0)}, {x})[0];
  CHECK(std::fabs(engine::sum(once * once).item()) > 0.0);
  test::require_close(tripled, engine::mul_scalar(once, 3.0), 1e-14, 1e-14, "3 x gradient");
  // No gradient is recorded (or computed) without a tape.
  engine::NoGradGuard no_grad;
  engine::Generator gen_c(4);
  Tensor plain = losses::spc2_triplet_loss_fused(x, labels, Miner::Semihard, Metric::N, gen_c, 1.0);
  CHECK(plain.grad_fn() == nullptr);
  CHECK(plain.item() == Approx(loss.item()).epsilon(1e-14));
}

TEST_CASE("fused triplet: bad input names the function and the shapes", "[losses][fused_triplet]") {
  engine::Generator gen(1);
  const Tensor x = random_batch(4, 3, engine::DType::F32, 1);
  CHECK_THROWS_WITH(
      losses::spc2_triplet_loss_fused(x, labels_of({0, 1, 2, 2}), Miner::Random, Metric::N, gen,
                                      0.2),
      Catch::Contains("spc2_triplet_fused") && Catch::Contains("labels[0] == labels[1]"));
  CHECK_THROWS_WITH(
      losses::spc2_triplet_loss_fused(random_batch(3, 2, engine::DType::F32, 1),
                                      labels_of({0, 0, 1}), Miner::Random, Metric::N, gen, 0.2),
      Catch::Contains("spc2_triplet_fused") && Catch::Contains("[3, 2]"));
  CHECK_THROWS_WITH(losses::spc2_triplet_loss_fused(random_batch(1026, 1, engine::DType::F32, 1),
                                                    labels_of(losses_test::spc2_labels(513, 2)),
                                                    Miner::Random, Metric::N, gen, 0.2),
                    Catch::Contains("B <= 1024") && Catch::Contains("[1026, 1]"));
  CHECK_THROWS_WITH(
      losses::spc2_triplet_loss_fused(x, labels_of({0, 0, 1}), Miner::Random, Metric::N, gen, 0.2),
      Catch::Contains("labels i64 [4]"));
  CHECK_THROWS_WITH(losses::spc2_triplet_loss_fused(x, labels_of({0, 0, 1, 1}), Miner::Random,
                                                    Metric::N, gen, NAN),
                    Catch::Contains("margin must be finite"));
}

// ---- CUDA ------------------------------------------------------------------------------------

TEST_CASE("fused triplet cuda: matches the cpu twin over a sweep of shapes",
          "[losses][fused_triplet][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const Device cuda = Device::cuda();
  for (int64_t batch : {2, 6, 34, 256}) {
    for (int64_t dim : {1, 7, 128, 512}) {
      const int64_t pairs = batch / 2;
      const std::vector<int64_t> label_values = losses_test::spc2_labels(pairs, (pairs + 2) / 3);
      const Tensor host = random_batch(batch, dim, engine::DType::F32, 1000 + batch + dim);
      const Tensor device = host.to(cuda);
      for (Miner miner : kAllMiners) {
        for (Metric metric : kAllMetrics) {
          INFO("B " << batch << " D " << dim << " miner " << losses::miner_name(miner) << " metric "
                    << losses::metric_name(metric));
          const double margin = losses::default_margin(metric);
          const Outcome expected = fused(host, labels_of(label_values), miner, metric, 8, margin);
          const Outcome got =
              fused(device, labels_of(label_values).to(cuda), miner, metric, 8, margin);
          REQUIRE(got.loss.device().is_cuda());
          REQUIRE(got.grad.device().is_cuda());
          REQUIRE(got.triplets.negative.device().is_cuda());
          CHECK(got.offset_after == expected.offset_after);
          // Same mining distances bit for bit (f64 sums in the CPU's order, triplet_cuda.cu),
          // so the same picks and hardness.
          CHECK(got.triplets.anchor.to_indices() == expected.triplets.anchor.to_indices());
          CHECK(got.triplets.positive.to_indices() == expected.triplets.positive.to_indices());
          CHECK(got.triplets.negative.to_indices() == expected.triplets.negative.to_indices());
          CHECK(got.triplets.hardness.to_vector() == expected.triplets.hardness.to_vector());
          // Loss and gradient: both accumulate in f64 from the same f32 rows, only in another
          // order; the f32 results agree to a few ulps.
          const test::Tolerance tol = test::elementwise_tolerance();
          test::require_close(got.loss.to(Device::cpu()), expected.loss, tol.atol, tol.rtol,
                              "loss");
          test::require_close(got.grad.to(Device::cpu()), expected.grad, tol.atol, tol.rtol,
                              "gradient");
        }
      }
    }
  }
}

TEST_CASE("fused triplet cuda: broken SPC-2 labels make the loss NaN instead of syncing",
          "[losses][fused_triplet][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const Device cuda = Device::cuda();
  Tensor x = random_batch(6, 4, engine::DType::F32, 2).to(cuda);
  x.set_requires_grad(true);
  engine::Generator gen(1);
  Tensor loss = losses::spc2_triplet_loss_fused(x, labels_of({0, 0, 1, 2, 3, 3}).to(cuda),
                                                Miner::Random, Metric::N, gen, 0.2);
  CHECK(std::isnan(loss.item()));
  // The anchor of the broken pair (row 2) gets a NaN gradient.
  const std::vector<double> grad = engine::grad({loss}, {x})[0].to(Device::cpu()).to_vector();
  CHECK(std::isnan(grad[2 * 4]));
}

TEST_CASE("fused triplet cuda: f64 and labels on another device are refused",
          "[losses][fused_triplet][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const Device cuda = Device::cuda();
  engine::Generator gen(1);
  const Tensor x = random_batch(4, 3, engine::DType::F32, 1).to(cuda);
  CHECK_THROWS_WITH(losses::spc2_triplet_loss_fused(x, labels_of({0, 0, 1, 1}), Miner::Random,
                                                    Metric::N, gen, 0.2),
                    Catch::Contains("labels on cpu"));
  // f64 embeddings cannot reach the fused path on a GPU: the copy to the device refuses them.
  CHECK_THROWS_WITH(random_batch(4, 3, engine::DType::F64, 1).to(cuda),
                    Catch::Contains("f64 tensors are CPU-only"));
}
