// Small builders shared by the loss and miner tests.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"
#include "losses/distance.h"
#include "losses/miners.h"
#include "tests/support/tensors.h"

namespace losses_test {

using test::f64;

inline engine::Tensor labels_of(const std::vector<int64_t>& values) {
  return engine::Tensor::from_indices(values, {static_cast<int64_t>(values.size())});
}

inline engine::Tensor index(const std::vector<int64_t>& values) { return labels_of(values); }

// An SPC-2 label vector [0, 0, c1, c1, ...]: pair i gets class i % classes.
inline std::vector<int64_t> spc2_labels(int64_t pairs, int64_t classes) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < pairs; ++i) {
    out.push_back(i % classes);
    out.push_back(i % classes);
  }
  return out;
}

// Triplets with rows `a`, `p`, `n` (anchor i = a[i], ...), written out by hand.
inline losses::Triplets make_triplets(const std::vector<int64_t>& a, const std::vector<int64_t>& p,
                                      const std::vector<int64_t>& n) {
  losses::Triplets t;
  t.anchor = index(a);
  t.positive = index(p);
  t.negative = index(n);
  return t;
}

// Every miner and every metric, for the sweeps that must hold for all of them.
inline const losses::Miner kAllMiners[] = {losses::Miner::Random, losses::Miner::Semihard,
                                           losses::Miner::Softhard, losses::Miner::Distance,
                                           losses::Miner::Hardest};
inline const losses::Metric kAllMetrics[] = {losses::Metric::N, losses::Metric::E,
                                             losses::Metric::C};

}  // namespace losses_test
