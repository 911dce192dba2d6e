// Triplet miners (losses/miners.h): invariants on random SPC-2 batches for every miner and metric,
// reproducibility per seed, and constructed batches whose correct picks are known by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "engine/random.h"
#include "losses/miners.h"
#include "tests/losses/helpers.h"
#include "tests/support/allclose.h"
#include "tests/support/reference_distance.h"

using engine::Tensor;
using losses::Metric;
using losses::Miner;
using losses_test::f64;
using losses_test::kAllMiners;
using losses_test::labels_of;

namespace {

// The constructed 1-D batch (metric E, so distances are |x_i - x_j|):
//   row    0    1    2    3    4     5    6    7
//   x      0.0  1.0  0.5  2.5  1.5  -3.0  1.8  10.0
//   label  A    A    B    B    C     C    D    D
Tensor line_batch() { return f64({0.0, 1.0, 0.5, 2.5, 1.5, -3.0, 1.8, 10.0}, {8, 1}); }
Tensor line_labels() { return labels_of({0, 0, 1, 1, 2, 2, 3, 3}); }

struct Picks {
  std::vector<int64_t> a, p, n;
  std::vector<double> h;
};

Picks mine(const Tensor& x, const Tensor& y, Miner miner, Metric metric, uint64_t seed,
           double margin) {
  engine::Generator gen(seed);
  losses::Triplets t = losses::mine_triplets(x, y, miner, metric, gen, margin);
  return {t.anchor.to_indices(), t.positive.to_indices(), t.negative.to_indices(),
          t.hardness.to_vector()};
}

}  // namespace

TEST_CASE("miners: names and robrank's sampler letters", "[losses][miners]") {
  CHECK(losses::parse_miner("r") == Miner::Random);
  CHECK(losses::parse_miner("m") == Miner::Semihard);
  CHECK(losses::parse_miner("s") == Miner::Softhard);
  CHECK(losses::parse_miner("d") == Miner::Distance);
  CHECK(losses::parse_miner("h") == Miner::Hardest);
  for (Miner m : kAllMiners) CHECK(losses::parse_miner(losses::miner_name(m)) == m);
  REQUIRE_THROWS_WITH(losses::parse_miner("lifted"), Catch::Contains("lifted"));
  // find_miner: the same names without throwing, nothing for the others (HM's hm.destination
  // tells its miners from its pseudo-hardness names with it).
  CHECK(losses::find_miner("m") == Miner::Semihard);
  CHECK(losses::find_miner("hardest") == Miner::Hardest);
  CHECK_FALSE(losses::find_miner("lifted").has_value());
  CHECK_FALSE(losses::find_miner("g_lga").has_value());
  CHECK_FALSE(losses::find_miner("").has_value());
}

TEST_CASE("miners: invariants on random SPC-2 batches for every miner and metric",
          "[losses][miners]") {
  // 12 pairs of 4 classes, D = 8. For every miner: triplet i has anchor 2i; the positive shares
  // the anchor's label (and is the partner except for softhard); the negative has a different
  // label; indices are in range; the hardness equals d(a,p) - d(a,n) from reference distances.
  const int64_t pairs = 12, batch = 2 * pairs, dim = 8;
  const std::vector<int64_t> labels = losses_test::spc2_labels(pairs, 4);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      engine::Generator data_gen(100 + seed);
      Tensor x = engine::normal({batch, dim}, 0.0, 1.0, data_gen, engine::DType::F64);
      const std::vector<double> xv = x.to_vector();
      for (Miner miner : kAllMiners) {
        INFO("metric " << losses::metric_name(metric) << ", miner " << losses::miner_name(miner)
                       << ", seed " << seed);
        Picks t = mine(x, labels_of(labels), miner, metric, seed, losses::default_margin(metric));
        REQUIRE(t.a.size() == static_cast<size_t>(pairs));
        for (int64_t i = 0; i < pairs; ++i) {
          const int64_t a = t.a[i], p = t.p[i], n = t.n[i];
          CHECK(a == 2 * i);
          REQUIRE((p >= 0 && p < batch && n >= 0 && n < batch));
          CHECK(labels[p] == labels[a]);
          // Distance-weighted under E: raw Gaussian rows lie farther apart than 2, where
          // log(1 - d^2/4) is NaN, and robrank's fallback samples the whole batch (tested below).
          if (!(miner == Miner::Distance && metric == Metric::E)) {
            CHECK(labels[n] != labels[a]);
            CHECK(n != a);
          }
          if (miner != Miner::Softhard) CHECK(p == 2 * i + 1);
          const double h = test::reference_distance(xv, dim, a, p, metric) -
                           test::reference_distance(xv, dim, a, n, metric);
          CHECK(t.h[i] == Approx(h).margin(1e-12));
        }
      }
    }
  }
}

TEST_CASE("miners: reproducible per seed, and the seed matters", "[losses][miners]") {
  const std::vector<int64_t> labels = losses_test::spc2_labels(16, 8);
  engine::Generator data_gen(7);
  Tensor x = engine::normal({32, 4}, 0.0, 1.0, data_gen);  // f32 works the same
  for (Miner miner : kAllMiners) {
    INFO("miner " << losses::miner_name(miner));
    Picks first = mine(x, labels_of(labels), miner, Metric::N, 42, 0.2);
    Picks again = mine(x, labels_of(labels), miner, Metric::N, 42, 0.2);
    CHECK(first.p == again.p);
    CHECK(first.n == again.n);
    CHECK(first.h == again.h);
  }
  // Random negatives: 16 anchors, each with 28 candidates: two seeds agreeing everywhere would
  // be a broken generator.
  CHECK(mine(x, labels_of(labels), Miner::Random, Metric::N, 1, 0.2).n !=
        mine(x, labels_of(labels), Miner::Random, Metric::N, 2, 0.2).n);
  // The generator advances by the same amount whatever the data.
  engine::Generator g1(5), g2(5);
  losses::mine_triplets(x, labels_of(labels), Miner::Hardest, Metric::N, g1);
  losses::mine_triplets(x, labels_of(labels), Miner::Softhard, Metric::E, g2);
  CHECK(g1.offset == g2.offset);
  CHECK(g1.offset > 0);
}

TEST_CASE("semihard miner: picks from the margin band and nowhere else", "[losses][miners]") {
  // line_batch, metric E, margin 1. Anchor 0 (x = 0) with partner 1: d(a,p) = 1, band
  // 1 < d(a,n) < 2. Different-label distances: row 2: 0.5 (harder than the positive), row 3: 2.5
  // and row 5: 3 and row 7: 10 (easy, outside the margin), row 4: 1.5 and row 6: 1.8 (in the
  // band). So the negative of anchor 0 is row 4 or row 6, hardness 1 - 1.5 = -0.5 or -0.8.
  // Anchor 2 (x = 0.5, partner 2.5): d(a,p) = 2, band (2, 3); different-label distances
  // 0.5, 0.5, 1.0, 3.5, 1.3, 9.5 -> none in the band: fallback to any different-label row.
  std::set<int64_t> anchor0, anchor2;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Picks t = mine(line_batch(), line_labels(), Miner::Semihard, Metric::E, seed, 1.0);
    anchor0.insert(t.n[0]);
    anchor2.insert(t.n[1]);
    CHECK(t.h[0] == Approx(t.n[0] == 4 ? -0.5 : -0.8));
  }
  CHECK(anchor0 == std::set<int64_t>{4, 6});
  CHECK(anchor2 == std::set<int64_t>{0, 1, 4, 5, 6, 7});
}

TEST_CASE("hardest miner: the closest different-label item, first on ties", "[losses][miners]") {
  // line_batch, metric E. Anchor 0 (0.0): closest negative row 2 (d 0.5); hardness 1 - 0.5.
  // Anchor 2 (0.5): rows 0 and 1 both at 0.5 -> the first, row 0; hardness 2 - 0.5 = 1.5.
  // Anchor 4 (1.5, partner -3): row 6 at 0.3; hardness 4.5 - 0.3 = 4.2.
  // Anchor 6 (1.8, partner 10): row 4 at 0.3; hardness 8.2 - 0.3 = 7.9.
  Picks t = mine(line_batch(), line_labels(), Miner::Hardest, Metric::E, 0, 1.0);
  CHECK(t.p == std::vector<int64_t>{1, 3, 5, 7});
  CHECK(t.n == std::vector<int64_t>{2, 0, 6, 4});
  test::require_close(t.h, {0.5, 1.5, 4.2, 7.9}, 1e-12, 0, "hardness");
}

TEST_CASE("hardest miner: skips a negative at distance exactly zero, as robrank",
          "[losses][miners]") {
  // Row 2 (label B) duplicates the anchor (d = 0): robrank's mask * distance treats it like a
  // masked entry and takes the smallest nonzero distance, row 3 at 2.
  Tensor x = f64({0.0, 1.0, 0.0, 2.0}, {4, 1});
  Picks t = mine(x, labels_of({0, 0, 1, 1}), Miner::Hardest, Metric::E, 0, 1.0);
  CHECK(t.n[0] == 3);
  // With every negative at 0 the first of them is taken.
  Tensor y = f64({0.0, 1.0, 0.0, 0.0}, {4, 1});
  CHECK(mine(y, labels_of({0, 0, 1, 1}), Miner::Hardest, Metric::E, 0, 1.0).n[0] == 2);
}

TEST_CASE("softhard miner: hand-computed picks on the line batch", "[losses][miners]") {
  // Anchor 0 (0.0): same-label distances {0 (itself), 1.0} -> max 1.0; negatives closer than 1.0:
  // only row 2 (0.5). Min negative distance 0.5 -> positives farther than 0.5: only row 1. So
  // (0, 1, 2), hardness 1 - 0.5 = 0.5, for every seed.
  // Anchor 2 (0.5): same-label {0, 2.0} -> negatives closer than 2.0: rows 0, 1 (0.5), 4 (1.0),
  // 6 (1.3). Min negative 0.5 -> positive row 3 (2.0).
  std::set<int64_t> anchor2;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    Picks t = mine(line_batch(), line_labels(), Miner::Softhard, Metric::E, seed, 1.0);
    CHECK(t.p[0] == 1);
    CHECK(t.n[0] == 2);
    CHECK(t.h[0] == Approx(0.5));
    CHECK(t.p[1] == 3);
    anchor2.insert(t.n[1]);
  }
  CHECK(anchor2 == std::set<int64_t>{0, 1, 4, 6});
}

TEST_CASE("softhard miner: the fallback positive can be the anchor itself, as robrank",
          "[losses][miners]") {
  // x = 0.0 A, 0.1 A, 5.0 B, 5.1 B. Anchor 0: max same-label distance 0.1, no negative closer ->
  // negative uniform over rows {2, 3}; min negative distance 5.0, no positive farther ->
  // positive uniform over the same-label rows {0 (the anchor itself), 1}.
  Tensor x = f64({0.0, 0.1, 5.0, 5.1}, {4, 1});
  std::set<int64_t> positives, negatives;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    Picks t = mine(x, labels_of({0, 0, 1, 1}), Miner::Softhard, Metric::E, seed, 1.0);
    positives.insert(t.p[0]);
    negatives.insert(t.n[0]);
    if (t.p[0] == 0) CHECK(t.h[0] == Approx(0.0 - 5.0 - (t.n[0] == 3 ? 0.1 : 0.0)));
  }
  CHECK(positives == std::set<int64_t>{0, 1});
  CHECK(negatives == std::set<int64_t>{2, 3});
}

TEST_CASE("random miner: uniform over different-label items, fallback to any item",
          "[losses][miners]") {
  // Anchor 0 of the line batch has 6 different-label rows {2..7}; over 600 draws each appears
  // ~100 times (binomial sd ~9; 50 is > 5 sd away).
  std::vector<int> counts(8, 0);
  for (uint64_t seed = 0; seed < 600; ++seed)
    ++counts[mine(line_batch(), line_labels(), Miner::Random, Metric::E, seed, 1.0).n[0]];
  CHECK(counts[0] == 0);
  CHECK(counts[1] == 0);
  for (int j = 2; j < 8; ++j) CHECK(counts[j] > 50);
  // A batch of one class has no negative: robrank then picks any row (the anchor included).
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 100; ++seed)
    seen.insert(
        mine(f64({0, 1}, {2, 1}), labels_of({4, 4}), Miner::Random, Metric::E, seed, 1.0).n[0]);
  CHECK(seen == std::set<int64_t>{0, 1});
}

TEST_CASE("miners: a batch of one class falls back to any item, the partner as positive",
          "[losses][miners]") {
  // No different-label item anywhere: semihard, softhard, distance-weighted and hardest all fall
  // back to a negative uniform over all B items, the anchor included (miners.h), and keep the
  // partner as the positive (softhard too: it re-samples positives only against negatives). Over
  // 400 draws each of the 4 rows is anchor 0's negative ~100 times (binomial sd ~8.7).
  const std::vector<double> rows = {0, 1, 3, 6};
  for (Miner miner : {Miner::Semihard, Miner::Softhard, Miner::Distance, Miner::Hardest}) {
    INFO("miner " << losses::miner_name(miner));
    std::vector<int> counts(4, 0);
    for (uint64_t seed = 0; seed < 400; ++seed) {
      const Picks m = mine(f64(rows, {4, 1}), labels_of({7, 7, 7, 7}), miner, Metric::E, seed, 1.0);
      CHECK(m.p == std::vector<int64_t>{1, 3});
      ++counts[m.n[0]];
    }
    for (int j = 0; j < 4; ++j) CHECK(counts[j] > 50);
  }
}

TEST_CASE("distance-weighted miner: hand-computed sampling probabilities", "[losses][miners]") {
  // Metric E, D = 4: weight q(d)^-1 = exp((2 - D) log d - ((D - 3)/2) log(1 - d^2/4))
  //   = d^-2 (1 - d^2/4)^-1/2.  Anchor at the origin, partner at distance 0.1, negatives at 0.5
  //   (row 2) and 1.0 (row 3): w(0.5) = 4 / sqrt(0.9375) = 4.131182, w(1.0) = 1 / sqrt(0.75) =
  //   1.154701, so P(row 2) = 4.131182 / 5.285883 = 0.781550. Over 4000 draws the frequency has
  //   sd sqrt(0.78 * 0.22 / 4000) = 0.0065; allow 0.03.
  Tensor x = f64({0, 0, 0, 0, 0.1, 0, 0, 0, 0, 0.5, 0, 0, 0, 0, 1.0, 0}, {4, 4});
  int row2 = 0;
  const int draws = 4000;
  for (uint64_t seed = 0; seed < draws; ++seed) {
    Picks t = mine(x, labels_of({0, 0, 1, 1}), Miner::Distance, Metric::E, seed, 1.0);
    REQUIRE((t.n[0] == 2 || t.n[0] == 3));
    row2 += t.n[0] == 2;
  }
  CHECK(double(row2) / draws == Approx(0.781550).margin(0.03));
}

TEST_CASE("distance-weighted miner: robrank's NaN fallback samples the whole batch",
          "[losses][miners]") {
  // Metric E, D = 4, a negative at distance 3 > 2: log(1 - 9/4) is NaN, torch's max propagates
  // it, every weight becomes NaN -> 0, and robrank falls back to 1e-7 everywhere: uniform over
  // all four rows, same-label ones included.
  Tensor x = f64({0, 0, 0, 0, 0.1, 0, 0, 0, 3.0, 0, 0, 0, 0.5, 0, 0, 0}, {4, 4});
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 200; ++seed)
    seen.insert(mine(x, labels_of({0, 0, 1, 1}), Miner::Distance, Metric::E, seed, 1.0).n[0]);
  CHECK(seen == std::set<int64_t>{0, 1, 2, 3});
}

TEST_CASE("distance-weighted miner: with D = 512 it behaves like hardest", "[losses][miners]") {
  // Unit vectors in D = 512 (metric N): w(d) ~ -510 log d, so a negative even slightly closer
  // than the others gets almost all the mass. Anchor e0, partner e1 (d = sqrt 2), negatives at
  // d(e0, n) = |e0 - n|: n = 0.8 e0 + 0.6 e2 (d = sqrt(0.4) = 0.632) and e3 (d = sqrt 2).
  // w difference: -510 (log 0.632 - log 1.414) - 254.5 (log 0.9 - log 0.5) = 410.6 - 149.6 > 200,
  // a probability ratio above e^200: the closer one is always drawn.
  std::vector<double> v(4 * 512, 0.0);
  v[0] = 1.0;            // row 0: e0
  v[512 + 1] = 1.0;      // row 1: e1
  v[2 * 512 + 0] = 0.8;  // row 2: 0.8 e0 + 0.6 e2
  v[2 * 512 + 2] = 0.6;
  v[3 * 512 + 3] = 1.0;  // row 3: e3
  for (uint64_t seed = 0; seed < 20; ++seed)
    CHECK(mine(f64(v, {4, 512}), labels_of({0, 0, 1, 1}), Miner::Distance, Metric::N, seed, 0.2)
              .n[0] == 2);
}

TEST_CASE("miners: SPC-2 layout and arguments are checked", "[losses][miners]") {
  engine::Generator gen(0);
  REQUIRE_THROWS_WITH(losses::mine_triplets(f64({0, 1, 2}, {3, 1}), labels_of({0, 0, 1}),
                                            Miner::Random, Metric::E, gen),
                      Catch::Contains("mine_triplets") && Catch::Contains("even"));
  REQUIRE_THROWS_WITH(losses::mine_triplets(f64({0, 1, 2, 3}, {4, 1}), labels_of({0, 1, 1, 1}),
                                            Miner::Random, Metric::E, gen),
                      Catch::Contains("labels[0] == labels[1]"));
}
