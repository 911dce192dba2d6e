// Retrieval metrics from relevant-item positions (definitions and algorithm in retrieval.h).
#include "metrics/retrieval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "kernels/common/check.h"
#include "metrics/labels.h"

namespace metrics {

namespace {

// Per-thread buffers, reused across queries so the hot loop never allocates.
struct RankScratch {
  std::vector<std::pair<float, int64_t>> relevant;  // (key, index), sorted
  std::vector<float> thresholds;                    // relevant keys, sorted, then +inf
  std::vector<float> cand_keys;                     // items that may precede a relevant item
  std::vector<int64_t> cand_index;
  std::vector<int64_t> hist;
  std::vector<int64_t> positions;
};

// Binary searches run in groups of kLanes independent items so that their dependent loads
// overlap (one search alone is a chain of ~log2 R cache hits).
constexpr int kLanes = 8;

// p(j) = #{relevant r : (t_r, r) <= (key, j)}: a lower bound on the keys (#{t_r < key}), then
// the run of exactly equal keys, whose indices ascend, counted while r <= j.
// thresholds[R] is a +inf sentinel, never equal to a (finite) key, which ends the run.
inline int64_t finish_tie(const RankScratch& s, int64_t p, float key, int64_t item) {
  while (s.thresholds[p] == key && s.relevant[p].second <= item) ++p;
  return p;
}

// Fills s.positions with the 1-based positions of the relevant items s.relevant (unsorted on
// entry) in query `query`'s ranking of keys[0..n).
void rank_relevant(const float* keys, int64_t n, int64_t query, RankScratch& s) {
  const int64_t rcount = static_cast<int64_t>(s.relevant.size());
  s.positions.clear();
  if (rcount == 0) return;
  std::sort(s.relevant.begin(), s.relevant.end());
  s.thresholds.resize(static_cast<size_t>(rcount + 1));
  for (int64_t r = 0; r < rcount; ++r) s.thresholds[r] = s.relevant[r].first;
  s.thresholds[rcount] = std::numeric_limits<float>::infinity();
  const float last = s.thresholds[rcount - 1];

  // Items with key > t_R have p(j) = R: they precede no relevant item, so they are skipped.
  if (static_cast<int64_t>(s.cand_keys.size()) < n) {
    s.cand_keys.resize(static_cast<size_t>(n));
    s.cand_index.resize(static_cast<size_t>(n));
  }
  int64_t cands = 0;
  for (int64_t j = 0; j < n; ++j) {
    if (j == query || keys[j] > last) continue;
    s.cand_keys[cands] = keys[j];
    s.cand_index[cands] = j;
    ++cands;
  }
  s.hist.assign(static_cast<size_t>(rcount + 1), 0);
  const float* t = s.thresholds.data();
  int64_t c = 0;
  for (; c + kLanes <= cands; c += kLanes) {
    const float* key = s.cand_keys.data() + c;
    int64_t base[kLanes] = {};
    for (int64_t len = rcount; len > 1; len -= len / 2) {
      const int64_t half = len / 2;
      for (int l = 0; l < kLanes; ++l) base[l] += t[base[l] + half] < key[l] ? half : 0;
    }
    for (int l = 0; l < kLanes; ++l) {
      const int64_t p = base[l] + (t[base[l]] < key[l] ? 1 : 0);
      ++s.hist[finish_tie(s, p, key[l], s.cand_index[c + l])];
    }
  }
  for (; c < cands; ++c) {
    const float key = s.cand_keys[c];
    const int64_t p = std::lower_bound(t, t + rcount, key) - t;
    ++s.hist[finish_tie(s, p, key, s.cand_index[c])];
  }
  // j precedes the k-th relevant item (0-based k) iff p(j) <= k; the relevant items before it
  // are among those j (each relevant r_m has p = m + 1), r_k itself is not.
  int64_t before = 0;
  for (int64_t k = 0; k < rcount; ++k) {
    before += s.hist[k];
    s.positions.push_back(before + 1);
  }
}

struct QueryScore {
  double ap = 0.0, ap_r10 = 0.0, ap_r = 0.0;
  int64_t first = 0;  // position of the first relevant item; 0 = lone query
};

QueryScore score(const std::vector<int64_t>& positions) {
  QueryScore q;
  if (positions.empty()) return q;
  q.first = positions.front();
  q.ap = average_precision(positions);
  q.ap_r10 = average_precision_at(positions, 10);
  q.ap_r = average_precision_at(positions, static_cast<int64_t>(positions.size()));
  return q;
}

}  // namespace

std::vector<int64_t> relevant_positions(const float* keys, int64_t n, int64_t query,
                                        const std::vector<int64_t>& relevant) {
  ENGINE_CHECK(query >= 0 && query < n, "relevant_positions: query ", query, " outside [0, ", n,
               ")");
  RankScratch s;
  for (int64_t r : relevant) {
    ENGINE_CHECK(r >= 0 && r < n && r != query, "relevant_positions: relevant index ", r,
                 " must be in [0, ", n, ") and differ from the query ", query);
    s.relevant.emplace_back(keys[r], r);
  }
  rank_relevant(keys, n, query, s);
  return s.positions;
}

bool hit_at_k(const std::vector<int64_t>& positions, int64_t k) {
  return !positions.empty() && positions.front() <= k;
}

double average_precision(const std::vector<int64_t>& positions) {
  if (positions.empty()) return 0.0;
  double sum = 0.0;
  for (size_t k = 0; k < positions.size(); ++k) {
    sum += static_cast<double>(k + 1) / static_cast<double>(positions[k]);
  }
  return sum / static_cast<double>(positions.size());
}

double average_precision_at(const std::vector<int64_t>& positions, int64_t r) {
  ENGINE_CHECK(r >= 1, "average_precision_at: r must be >= 1, got ", r);
  double sum = 0.0;
  for (size_t k = 0; k < positions.size() && positions[k] <= r; ++k) {
    sum += static_cast<double>(k + 1) / static_cast<double>(positions[k]);
  }
  return sum / static_cast<double>(r);
}

RetrievalResult evaluate_retrieval(const Points& points, const std::vector<int64_t>& labels,
                                   const RetrievalOptions& options) {
  const int64_t n = points.n;
  ENGINE_CHECK(static_cast<int64_t>(labels.size()) == n, "evaluate_retrieval: ", labels.size(),
               " labels for ", n, " embeddings");
  ENGINE_CHECK(!options.ks.empty(), "evaluate_retrieval: no K given for recall@K");
  for (int64_t k : options.ks)
    ENGINE_CHECK(k >= 1, "evaluate_retrieval: recall@K needs K >= 1, got ", k);
  ENGINE_CHECK(
      options.gallery_block >= 1 && options.query_block >= 0 && options.memory_budget_bytes >= 1,
      "evaluate_retrieval: bad block options (query_block ", options.query_block,
      ", gallery_block ", options.gallery_block, ")");

  RetrievalResult result;
  result.ks = options.ks;
  result.recall.assign(options.ks.size(), 0.0);
  if (n == 0) return result;

  int64_t qb = options.query_block;
  if (qb == 0) {
    qb = std::clamp<int64_t>(
        options.memory_budget_bytes / (static_cast<int64_t>(sizeof(float)) * n), 1, 1024);
  }
  qb = std::min(qb, n);
  result.query_block = qb;
  const int64_t gb = std::min(options.gallery_block, n);
  const LabelGroups groups = group_by_label(labels);

  std::vector<float> block(static_cast<size_t>(qb * n));
  std::vector<QueryScore> scores(static_cast<size_t>(n));
  for (int64_t q0 = 0; q0 < n; q0 += qb) {
    const int64_t rows = std::min(qb, n - q0);
    const int64_t chunks = (n + gb - 1) / gb;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const int64_t g0 = chunk * gb;
      key_tile(points, q0, rows, points, g0, std::min(gb, n - g0), block.data() + g0, n);
    }
#pragma omp parallel
    {
      RankScratch s;
#pragma omp for schedule(dynamic, 4)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t query = q0 + r;
        const float* keys = block.data() + r * n;
        s.relevant.clear();
        for (int64_t j : groups.members[groups.class_of[query]]) {
          if (j != query) s.relevant.emplace_back(keys[j], j);
        }
        rank_relevant(keys, n, query, s);
        scores[query] = score(s.positions);
      }
    }
  }

  // Means in query order, so the result does not depend on the thread count.
  double ap = 0.0, ap_r10 = 0.0, ap_r = 0.0;
  std::vector<int64_t> hits(options.ks.size(), 0);
  for (const QueryScore& q : scores) {
    if (q.first == 0) {
      ++result.lone_queries;
      continue;
    }
    ++result.queries;
    ap += q.ap;
    ap_r10 += q.ap_r10;
    ap_r += q.ap_r;
    for (size_t i = 0; i < options.ks.size(); ++i) hits[i] += q.first <= options.ks[i] ? 1 : 0;
  }
  const double count = static_cast<double>(result.queries);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  result.map = result.queries ? ap / count : nan;
  result.map_at_r10 = result.queries ? ap_r10 / count : nan;
  result.map_at_r = result.queries ? ap_r / count : nan;
  for (size_t i = 0; i < options.ks.size(); ++i) {
    result.recall[i] = result.queries ? static_cast<double>(hits[i]) / count : nan;
  }
  return result;
}

}  // namespace metrics
