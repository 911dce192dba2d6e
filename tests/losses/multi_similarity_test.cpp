// Multi-similarity loss (losses/multi_similarity.h): the mining filters by hand-computed
// thresholds, the loss counts only kept pairs, gradient check, spc2 anchors.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "losses/multi_similarity.h"
#include "tests/losses/helpers.h"
#include "tests/support/gradcheck.h"

using engine::Tensor;
using losses_test::f64;
using losses_test::labels_of;

namespace {

constexpr double kPi = 3.14159265358979323846;

// Unit 2-D rows at the given angles (degrees), scaled by `scale` (cosine similarity ignores it).
Tensor at_angles(const std::vector<double>& degrees, double scale = 1.0) {
  std::vector<double> v;
  for (double d : degrees) {
    v.push_back(scale * std::cos(d * kPi / 180.0));
    v.push_back(scale * std::sin(d * kPi / 180.0));
  }
  return f64(v, {static_cast<int64_t>(degrees.size()), 2});
}

}  // namespace

// Batch: angles 0, 10, 80 (class A) and 45, 180 (class B). S_ij = cos(angle_i - angle_j):
//          0        1        2        3        4
//   0   1        0.984808 0.173648 0.707107 -1
//   1   0.984808 1        0.342020 0.819152 -0.984808
//   2   0.173648 0.342020 1        0.819152 -0.173648
//   3   0.707107 0.819152 0.819152 1        -0.707107
//   4  -1       -0.984808 -0.173648 -0.707107 1
// Anchor 0: P = {1, 2}, N = {3, 4}; min P = 0.173648, max N = 0.707107.
//   positives kept if S - 0.1 < 0.707107: row 1 (0.884808) is NOT kept (too easy), row 2 is.
//   negatives kept if S + 0.1 > 0.173648: row 3 (0.807) kept, row 4 (-0.9) NOT kept.
// Anchor 1: P = {0, 2} (min 0.342020), N = {3, 4} (max 0.819152): keeps positive 2 only
//   (0.884808 >= 0.819152 drops row 0) and negative 3 only.
// Anchor 2: P = {0, 1} (min 0.173648), N = {3, 4} (max 0.819152): keeps positives 0 and 1,
//   negative 3 only (-0.073648 < 0.173648 drops row 4).
// Anchor 3: P = {4} (min -0.707107), N = {0, 1, 2} (max 0.819152): keeps all.
// Anchor 4: P = {3} (min -0.707107), N = {0, 1, 2} (max -0.173648): keeps positive 3; negatives
//   with S > -0.807107: only row 2 (rows 0 and 1 at -1 and -0.98 are dropped).
TEST_CASE("multi-similarity: mining filters easy positives and easy negatives",
          "[losses][multi_similarity]") {
  losses::MultiSimilarityMining m =
      losses::mine_multi_similarity(at_angles({0, 10, 80, 45, 180}), labels_of({0, 0, 0, 1, 1}));
  REQUIRE(m.anchor_rows == std::vector<int64_t>{0, 1, 2, 3, 4});
  const std::vector<uint8_t> positive = {0, 0, 1, 0, 0,  //
                                         0, 0, 1, 0, 0,  //
                                         1, 1, 0, 0, 0,  //
                                         0, 0, 0, 0, 1,  //
                                         0, 0, 0, 1, 0};
  const std::vector<uint8_t> negative = {0, 0, 0, 1, 0,  //
                                         0, 0, 0, 1, 0,  //
                                         0, 0, 0, 1, 0,  //
                                         1, 1, 1, 0, 0,  //
                                         0, 0, 1, 0, 0};
  CHECK(m.positive == positive);
  CHECK(m.negative == negative);
  CHECK(m.used == std::vector<uint8_t>{1, 1, 1, 1, 1});
}

TEST_CASE("multi-similarity: hand-computed loss over the kept pairs only",
          "[losses][multi_similarity]") {
  // alpha 2, beta 40, lambda 0.5. Anchor 0: pos (1/2) log(1 + e^{-2 (0.173648 - 0.5)}) =
  //   (1/2) log(1 + e^{0.652704}) = 0.535916; neg (1/40) log(1 + e^{40 (0.707107 - 0.5)}) =
  //   (1/40) log(1 + e^{8.284271}) = 0.207113; l0 = 0.743029.
  // Likewise l1 = 0.431777 + 0.319152 = 0.750929 (S12 = 0.342020, S13 = 0.819152),
  //   l2 = (1/2) log(1 + e^{0.652704} + e^{0.316040}) + 0.319152 = 0.728412 + 0.319152 = 1.047564,
  //   l3 = (1/2) log(1 + e^{2.414214}) + (1/40) log(1 + e^{8.284271} + 2 e^{12.766081}) =
  //        1.249938 + 0.336622 = 1.586559,
  //   l4 = 1.249938 + (1/40) log(1 + e^{-26.945927}) = 1.249938.
  // L = (0.743029 + 0.750929 + 1.047564 + 1.586559 + 1.249938) / 5 = 1.075604.
  // (Keeping the easy positive 0-1 alone would add e^{-0.969616} inside anchor 0's log and
  // raise L: the filtering is visible in the value.)
  Tensor x = at_angles({0, 10, 80, 45, 180}, 3.0);
  Tensor loss = losses::multi_similarity_loss(x, labels_of({0, 0, 0, 1, 1}));
  CHECK(loss.item() == Approx(1.0756039).margin(1e-6));
}

TEST_CASE("multi-similarity: a batch of only easy pairs is filtered out entirely",
          "[losses][multi_similarity]") {
  // A at 0 and 5 degrees, B at 90 and 95: every positive similarity is cos 5 = 0.996 and every
  // negative at most cos 85 = 0.087; 0.996 - 0.1 is not below 0.087, so no anchor keeps a
  // positive: no anchor is used, the loss is 0 and so is the gradient. (robrank's version, which
  // never filters, would train on all of them.)
  Tensor x = at_angles({0, 5, 90, 95});
  x.set_requires_grad(true);
  losses::MultiSimilarityMining m = losses::mine_multi_similarity(x, labels_of({0, 0, 1, 1}));
  CHECK(m.used == std::vector<uint8_t>{0, 0, 0, 0});
  Tensor loss = losses::multi_similarity_loss(x, labels_of({0, 0, 1, 1}));
  CHECK(loss.item() == 0.0);
  engine::backward(loss);
  for (double v : x.grad().to_vector()) CHECK(v == 0.0);
}

TEST_CASE("multi-similarity: spc2 anchors use the even rows only", "[losses][multi_similarity]") {
  // SPC-2 rows A 0, A 80 | B 45, B 180: anchors 0 and 2 only.
  // Anchor 0: P {1}: 0.173648, N {2: 0.707107, 3: -1}: keeps positive 1 (0.0736 < 0.707) and
  //   negative 2; l0 = 0.535916 + 0.207113 = 0.743029.
  // Anchor 2 (45): P {3}: -0.707107, N {0: 0.707107, 1: 0.819152}: keeps all;
  //   l2 = (1/2) log(1 + e^{2.414214}) + (1/40) log(1 + e^{8.284271} + e^{12.766081}) =
  //        1.249938 + 0.319433 = 1.569371. Mean over the two anchors 1.156200.
  Tensor x = at_angles({0, 80, 45, 180});
  losses::MultiSimilarityOptions options;
  options.spc2_anchors = true;
  losses::MultiSimilarityMining m =
      losses::mine_multi_similarity(x, labels_of({0, 0, 1, 1}), options);
  CHECK(m.anchor_rows == std::vector<int64_t>{0, 2});
  CHECK(losses::multi_similarity_loss(x, labels_of({0, 0, 1, 1}), options).item() ==
        Approx(1.156200).margin(2e-6));
  REQUIRE_THROWS_WITH(losses::multi_similarity_loss(x, labels_of({0, 1, 1, 1}), options),
                      Catch::Contains("multi_similarity"));
}

TEST_CASE("multi-similarity grad: random batch with filtering active",
          "[losses][multi_similarity][grad]") {
  // 10 rows in 3-D, 3 classes. The kept sets are constant under 1e-6 perturbations unless a
  // similarity sits within ~1e-6 of its threshold; the test asserts some pairs are filtered.
  Tensor x = test::random_leaf({10, 3}, 61);
  Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 1, 2, 0});
  losses::MultiSimilarityMining m = losses::mine_multi_similarity(x, y);
  int kept = 0, candidates = 0;
  for (size_t r = 0; r < m.anchor_rows.size(); ++r)
    for (size_t j = 0; j < 10; ++j) {
      kept += m.positive[r * 10 + j] + m.negative[r * 10 + j];
      candidates += j != r;
    }
  CHECK(kept < candidates);
  CHECK(kept > 0);
  test::require_gradcheck(
      [&](const std::vector<Tensor>& in) { return losses::multi_similarity_loss(in[0], y); }, {x});
}
