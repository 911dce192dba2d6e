// The ranking step of the retrieval metrics, CPU twin: the oracle of rank_query_block_cuda
// (contract and math in retrieval.h). Written plainly and independently of the histogram
// algorithm: a relevant item's position is 1 + the number of items j != q that precede it in the
// (key, index) order, counted over the whole row (O(R n) per query); then the sums, k ascending.
#include <algorithm>
#include <vector>

#include "kernels/common/check.h"
#include "kernels/retrieval/retrieval.h"

namespace engine::kernels {

namespace {

// The ranking order: the smaller key first, the smaller index on an exact tie (-0 == +0).
bool precedes(float key_a, int64_t index_a, float key_b, int64_t index_b) {
  return key_a < key_b || (key_a == key_b && index_a < index_b);
}

QueryRanking score(const std::vector<int64_t>& positions) {
  QueryRanking s{0, 0.0, 0.0, 0.0, 0.0};
  if (positions.empty()) return s;
  const int64_t relevant = static_cast<int64_t>(positions.size());
  double ap = 0.0, ap_10 = 0.0, ap_r = 0.0;
  int64_t hits_in_first_r = 0;
  for (int64_t k = 0; k < relevant; ++k) {
    const double precision = static_cast<double>(k + 1) / static_cast<double>(positions[k]);
    ap += precision;
    if (positions[k] <= 10) ap_10 += precision;
    if (positions[k] <= relevant) {
      ap_r += precision;
      ++hits_in_first_r;
    }
  }
  s.first_position = positions.front();
  s.average_precision = ap / static_cast<double>(relevant);
  s.ap_at_10 = ap_10 / 10.0;
  s.ap_at_r = ap_r / static_cast<double>(relevant);
  s.r_precision = static_cast<double>(hits_in_first_r) / static_cast<double>(relevant);
  return s;
}

}  // namespace

void rank_query_block_cpu(const float* keys, int64_t n, int64_t q0, int64_t rows,
                          const ClassLayout& classes, QueryRanking* out) {
  ENGINE_CHECK(q0 >= 0 && rows >= 1 && q0 + rows <= n, "rank_query_block_cpu: queries [", q0, ", ",
               q0 + rows, ") must be a non-empty range of the ", n, " items");
  ENGINE_CHECK(classes.classes >= 1, "rank_query_block_cpu: ", classes.classes, " classes");
  std::vector<int64_t> positions;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t query = q0 + r;
    const float* row = keys + r * n;
    const int64_t c = classes.class_of[query];
    ENGINE_CHECK(c >= 0 && c < classes.classes, "rank_query_block_cpu: item ", query, " has class ",
                 c, ", outside [0, ", classes.classes, ")");
    const int64_t begin = classes.class_offsets[c], end = classes.class_offsets[c + 1];
    ENGINE_CHECK(0 <= begin && begin <= end && end <= n, "rank_query_block_cpu: class ", c,
                 " spans members [", begin, ", ", end, ") of ", n);
    positions.clear();
    bool has_self = false;
    for (int64_t m = begin; m < end; ++m) {
      const int64_t item = classes.class_members[m];
      ENGINE_CHECK(item >= 0 && item < n, "rank_query_block_cpu: class ", c, " member ", item,
                   " outside [0, ", n, ")");
      if (item == query) {
        has_self = true;
        continue;
      }
      int64_t before = 0;
      for (int64_t j = 0; j < n; ++j) {
        if (j != query && precedes(row[j], j, row[item], item)) ++before;
      }
      positions.push_back(before + 1);
    }
    ENGINE_CHECK(has_self, "rank_query_block_cpu: item ", query, " is not in the members of its ",
                 "class ", c);
    std::sort(positions.begin(), positions.end());
    out[r] = score(positions);
  }
}

}  // namespace engine::kernels
