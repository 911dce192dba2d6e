// Retrieval metrics from relevant-item positions (definitions and algorithm in retrieval.h).
#include "metrics/retrieval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "engine/tensor.h"
#include "kernels/common/check.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/retrieval/retrieval.h"
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
  double ap = 0.0, ap_r10 = 0.0, ap_r = 0.0, r_precision = 0.0;
  int64_t first = 0;  // position of the first relevant item; 0 = lone query
};

QueryScore score(const std::vector<int64_t>& positions) {
  QueryScore q;
  if (positions.empty()) return q;
  q.first = positions.front();
  q.ap = average_precision(positions);
  q.ap_r10 = average_precision_at(positions, 10);
  q.ap_r = average_precision_at(positions, static_cast<int64_t>(positions.size()));
  q.r_precision = r_precision(positions);
  return q;
}

// The CPU path: per block, the keys to all n items by tiled GEMMs, then each query's row ranked.
std::vector<QueryScore> score_on_cpu(const Points& points, const LabelGroups& groups, int64_t qb,
                                     int64_t gb) {
  const int64_t n = points.n;
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
  return scores;
}

// A device copy of `bytes` bytes of host memory as a tensor of `shape`.
engine::Tensor upload(const void* host, size_t bytes, std::vector<int64_t> shape,
                      engine::DType dtype, engine::Device device) {
  engine::Tensor t = engine::Tensor::empty(std::move(shape), dtype, device);
  if (bytes > 0) engine::kernels::cuda_memcpy_host_to_device(t.raw_data(), host, bytes);
  return t;
}

// The GPU path (retrieval.h): everything uploaded once, then per block the key tile
// (kernels::retrieval_key_tile_cuda) and its ranking (kernels::rank_query_block_cuda) into a
// device array of per-query scores, copied back at the end.
std::vector<QueryScore> score_on_cuda(const Points& points, const LabelGroups& groups, int64_t qb,
                                      engine::Device device) {
  namespace kernels = engine::kernels;
  using engine::DType;
  const int64_t n = points.n, d = points.d;
  const int visible = engine::cuda_device_count();
  ENGINE_CHECK(device.index < visible, "evaluate_retrieval: device ", device.str(),
               " is not available (", visible,
               " CUDA devices visible: no GPU, no driver, or a build without CUDA)");
  // The classes flattened: class c's members are class_members[class_offsets[c] .. [c + 1]).
  std::vector<int64_t> class_offsets = {0};
  std::vector<int64_t> class_members;
  class_members.reserve(static_cast<size_t>(n));
  for (const std::vector<int64_t>& members : groups.members) {
    class_members.insert(class_members.end(), members.begin(), members.end());
    class_offsets.push_back(static_cast<int64_t>(class_members.size()));
  }
  const int64_t classes = static_cast<int64_t>(groups.members.size());
  const engine::Tensor x =
      upload(points.x.data(), sizeof(float) * points.x.size(), {n, d}, DType::F32, device);
  const engine::Tensor sq_norms = upload(
      points.sq_norms.data(), sizeof(float) * points.sq_norms.size(), {n}, DType::F32, device);
  const engine::Tensor class_of = upload(
      groups.class_of.data(), sizeof(int64_t) * groups.class_of.size(), {n}, DType::I64, device);
  const engine::Tensor offsets =
      upload(class_offsets.data(), sizeof(int64_t) * class_offsets.size(), {classes + 1},
             DType::I64, device);
  const engine::Tensor members =
      upload(class_members.data(), sizeof(int64_t) * class_members.size(), {n}, DType::I64, device);
  const kernels::ClassLayout layout{class_of.data<int64_t>(), offsets.data<int64_t>(),
                                    members.data<int64_t>(), classes};
  const kernels::RankingKey key = points.metric == Metric::C
                                      ? kernels::RankingKey::Cosine
                                      : kernels::RankingKey::SquaredEuclidean;

  // A QueryRanking is five 8-byte fields, so an [n, 5] i64 tensor holds the device array (as raw
  // bytes: f64 tensors cannot live on a GPU).
  static_assert(sizeof(kernels::QueryRanking) == 5 * sizeof(int64_t), "QueryRanking layout");
  const engine::Tensor tile = engine::Tensor::empty({qb, n}, DType::F32, device);
  const engine::Tensor rankings = engine::Tensor::empty({n, 5}, DType::I64, device);
  auto* device_rankings = reinterpret_cast<kernels::QueryRanking*>(rankings.data<int64_t>());
  for (int64_t q0 = 0; q0 < n; q0 += qb) {
    const int64_t rows = std::min(qb, n - q0);
    kernels::retrieval_key_tile_cuda(x.data<float>(), sq_norms.data<float>(), n, d, key, q0, rows,
                                     tile.data<float>());
    kernels::rank_query_block_cuda(tile.data<float>(), n, q0, rows, layout, device_rankings + q0);
  }
  std::vector<kernels::QueryRanking> host(static_cast<size_t>(n));
  kernels::cuda_memcpy_device_to_host(host.data(), device_rankings,
                                      sizeof(kernels::QueryRanking) * host.size());
  std::vector<QueryScore> scores(static_cast<size_t>(n));
  for (int64_t q = 0; q < n; ++q) {
    const kernels::QueryRanking& h = host[static_cast<size_t>(q)];
    scores[q] = {h.average_precision, h.ap_at_10, h.ap_at_r, h.r_precision, h.first_position};
  }
  return scores;
}

// PML's avg_of_avgs: each class's scored queries averaged (in query order), then the classes
// (ascending label); classes without a scored query are left out. NaN when no query is scored.
ClassAverages average_per_class(const std::vector<QueryScore>& scores, const LabelGroups& groups) {
  ClassAverages sum;
  for (const std::vector<int64_t>& members : groups.members) {
    ClassAverages in_class;
    int64_t scored = 0;
    for (int64_t q : members) {
      const QueryScore& s = scores[static_cast<size_t>(q)];
      if (s.first == 0) continue;
      ++scored;
      in_class.precision_at_1 += s.first == 1 ? 1.0 : 0.0;
      in_class.map += s.ap;
      in_class.map_at_r += s.ap_r;
      in_class.r_precision += s.r_precision;
      in_class.mrr += 1.0 / static_cast<double>(s.first);
    }
    if (scored == 0) continue;
    const double count = static_cast<double>(scored);
    ++sum.classes;
    sum.precision_at_1 += in_class.precision_at_1 / count;
    sum.map += in_class.map / count;
    sum.map_at_r += in_class.map_at_r / count;
    sum.r_precision += in_class.r_precision / count;
    sum.mrr += in_class.mrr / count;
  }
  const double classes =
      sum.classes ? static_cast<double>(sum.classes) : std::numeric_limits<double>::quiet_NaN();
  sum.precision_at_1 /= classes;
  sum.map /= classes;
  sum.map_at_r /= classes;
  sum.r_precision /= classes;
  sum.mrr /= classes;
  return sum;
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

double r_precision(const std::vector<int64_t>& positions) {
  if (positions.empty()) return 0.0;
  const int64_t r = static_cast<int64_t>(positions.size());
  int64_t hits = 0;
  for (int64_t position : positions) hits += position <= r ? 1 : 0;
  return static_cast<double>(hits) / static_cast<double>(r);
}

double reciprocal_rank(const std::vector<int64_t>& positions) {
  return positions.empty() ? 0.0 : 1.0 / static_cast<double>(positions.front());
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
  result.device = options.device;
  const int64_t gb = std::min(options.gallery_block, n);
  const LabelGroups groups = group_by_label(labels);

  const std::vector<QueryScore> scores = options.device.is_cuda()
                                             ? score_on_cuda(points, groups, qb, options.device)
                                             : score_on_cpu(points, groups, qb, gb);

  // Means in query order, so the result does not depend on the thread count.
  double ap = 0.0, ap_r10 = 0.0, ap_r = 0.0, r_prec = 0.0, reciprocal = 0.0;
  int64_t first_hits = 0;
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
    r_prec += q.r_precision;
    reciprocal += 1.0 / static_cast<double>(q.first);
    first_hits += q.first == 1 ? 1 : 0;
    for (size_t i = 0; i < options.ks.size(); ++i) hits[i] += q.first <= options.ks[i] ? 1 : 0;
  }
  const double count = static_cast<double>(result.queries);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  result.map = result.queries ? ap / count : nan;
  result.map_at_r10 = result.queries ? ap_r10 / count : nan;
  result.map_at_r = result.queries ? ap_r / count : nan;
  result.r_precision = result.queries ? r_prec / count : nan;
  result.mrr = result.queries ? reciprocal / count : nan;
  result.precision_at_1 = result.queries ? static_cast<double>(first_hits) / count : nan;
  result.per_class = average_per_class(scores, groups);
  for (size_t i = 0; i < options.ks.size(); ++i) {
    result.recall[i] = result.queries ? static_cast<double>(hits[i]) / count : nan;
  }
  return result;
}

}  // namespace metrics
