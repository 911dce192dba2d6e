// Madry min-max (attacks/defenses/madry.cpp): a step with a budget equals madry.cpp's math
// written out with public pieces on a twin, bit for bit. What every recipe promises (the step
// contract, eps = 0 with its band and its one forward of [a; p; n], the adversary's objective at
// the clean images and its direction) is in contract_test.cpp.
#include <catch2/catch.hpp>

#include "attacks/defenses/common.h"
#include "attacks/defenses/defense.h"
#include "attacks/pgd.h"
#include "engine/ops.h"
#include "tests/defenses/fixture.h"

namespace {

using engine::Tensor;
using losses::Metric;

}  // namespace

TEST_CASE("Madry's step is its header's math written out: PGD hardening [a; p; n], one forward",
          "[defenses]") {
  // madry.cpp steps 1-3 re-derived on a twin (same weights, same stream) from public pieces:
  // mining with band 1.0 on the clean eval-mode embeddings, PGD (attacks/pgd.h) in eval mode on
  // the stacked [A; P; N] images descending -mean_i H(a~_i, p~_i, n~_i), then one train-mode
  // forward of the 3B adversarial images (a BN model) and the triplet loss with the loss margin.
  defense_test::TwinSetup s(103, 25, 113);
  models::Model& m = *s.twin.model;
  const losses::Triplets t = s.mine_on_twin().triplets;
  const int64_t b = t.size();
  const Tensor adversarial = s.pgd_on_twin(
      engine::concat({t.anchor, t.positive, t.negative}, 0), [&](const Tensor& x, int64_t) {
        const Tensor e = m.forward(x);
        return -engine::mean(losses::triplet_hardness(e.slice(0, 0, b), e.slice(0, b, 2 * b),
                                                      e.slice(0, 2 * b, 3 * b), Metric::N));
      });
  const Tensor e = m.forward(adversarial);
  const double expected = losses::triplet_loss_rows(e.slice(0, 0, b), e.slice(0, b, 2 * b),
                                                    e.slice(0, 2 * b, 3 * b), Metric::N, 0.2)
                              .item();

  // The same operations in the same order on the same values: bit-identical.
  s.check_matches_twin(s.step(s.options("madry")), expected);
}
