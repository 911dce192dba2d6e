// Retrieval metrics over the full ranking (docs/architecture.md; robrank utils.py; PML
// AccuracyCalculator).
//
// Query set = gallery = the set. For query q the ranking is every item j != q (self excluded BY
// INDEX) in ascending (key(q, j), j) order: by distance, an exact tie goes to the smaller index.
// Its relevant items are those with q's label. With pos_1 < pos_2 < ... < pos_R their 1-based
// positions in the ranking (R = number of same-label items other than q):
//
//   recall@K    1 if pos_1 <= K, else 0     (DML "Recall@K"; PML precision@1 is recall@1)
//   map         (1/R) sum_{k=1..R} k / pos_k                AP over the full ranking
//   map_at_r    (1/R) sum_{k: pos_k <= R} k / pos_k         PML mean_average_precision_at_r
//   map_at_r10  (1/10) sum_{k: pos_k <= 10} k / pos_k       robrank's fixed R = 10: the sum of
//               precision@i over the relevant i <= 10, divided by 10 even when R < 10
//   r_precision (1/R) #{k : pos_k <= R}                     PML r_precision: precision@R
//   mrr         1 / pos_1                                   PML mean_reciprocal_rank
//
// Every metric is the mean over queries that have at least one relevant item; queries without one
// ("lone" labels) are left out and counted, as PML does (robrank has no special case for them).
// When every query is lone the means are NaN (null in JSON), as recent PML returns (older
// releases returned 0).
// per_class holds PML's avg_of_avgs of its five ranking metrics: the mean over each class's
// scored queries, then the mean over those classes (ascending label); a class whose items are all
// lone queries (a class of one item) is not among them, as in PML, which drops lone queries first.
// PML's MRR is 0 for a query whose k nearest neighbours hold no relevant item; here the ranking is
// complete, so every scored query has a first relevant item (PML with its default k = None).
// The whole metrics table, against PML's and robrank's names: docs/metrics.md.
// Differences from the reference code, for comparing numbers:
//   - robrank averages per validation batch (128 queries) and then over batches, so its last,
//     partial batch weighs as much as a full one (Fashion-MNIST: 16 queries get 1/79); here every
//     query weighs the same. The difference is small, a fraction of that batch's deviation.
//   - older PML releases searched at most 1023 neighbours (faiss' limit), so their map_at_r is
//     cut short for classes with more than 1024 members (e.g. MNIST's digit 1 in the test
//     split); here R is the exact class size, as in recent PML with k = None.
//
// Whole-set algorithm (evaluate_retrieval): queries in blocks of B rows; for a block, the keys to
// all N items (B x N floats, tiled GEMMs, distance.h), then per query, without sorting the row:
//   1. gather the R relevant (key, index) pairs and sort them: t_1 <= ... <= t_R    O(R log R)
//   2. for every other item j, p(j) = #{relevant r : (t_r, r) <= (key_j, j)} by binary search;
//      items beyond t_R are skipped with one comparison                            O(N log R)
//   3. j precedes the k-th relevant item iff p(j) < k, so with hist[p] = #{j : p(j) = p},
//      pos_k = 1 + sum_{p < k} hist[p]                                            O(R)
// Cost: 2 N^2 d FLOPs of GEMM (the floor) + N^2 log2(R) comparisons at most. Memory: B x N floats
// for the block (B = memory_budget_bytes / 4N, at most 1024) + O(N) per thread; never N x N.
// Parallelization: OpenMP over gallery chunks for the GEMM, over the block's queries for ranking.
//
// With options.device a CUDA device the same blocks run on the GPU (kernels/retrieval): the points,
// squared norms and classes are uploaded once; per block one cuBLAS GEMM writes the B x N keys
// (gallery_block plays no part), the relevant (key, index) pairs of each query are sorted (CUB's
// segmented sort), one thread per (query, item) pair does the binary search and adds 1 to the
// query's histogram (integer atomics), and one thread per query forms the sums in the order used
// here; the per-query scores come back once and are averaged in query order, as on the CPU. Same
// contract and, from the same keys, the same bits; but the keys come from another f32 GEMM, so two
// items whose keys differ by a rounding error may swap places. Device memory: the points, the B x N
// tile and 20 bytes per (query, class member) pair of the block (at most 5 tiles: one class).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/device.h"
#include "metrics/distance.h"

namespace metrics {

// ---- one query, from its row of keys (what the hand-computed tests exercise) ----

// 1-based positions, ascending, of items `relevant` (indices, not containing `query`) in the
// ranking of query `query` given keys[0..n) = key(query, j).
std::vector<int64_t> relevant_positions(const float* keys, int64_t n, int64_t query,
                                        const std::vector<int64_t>& relevant);
bool hit_at_k(const std::vector<int64_t>& positions, int64_t k);
// (1/R) sum over all relevant of k/pos_k; 0 when there is none.
double average_precision(const std::vector<int64_t>& positions);
// (1/r) sum over relevant with pos_k <= r of k/pos_k: r = 10 is map_at_r10, r = R is map_at_r.
double average_precision_at(const std::vector<int64_t>& positions, int64_t r);
// (1/R) #{k : pos_k <= R}, R = positions.size(): the fraction of the first R ranked items that
// are relevant; 0 when there is none.
double r_precision(const std::vector<int64_t>& positions);
// 1 / pos_1; 0 when there is no relevant item.
double reciprocal_rank(const std::vector<int64_t>& positions);

// ---- the whole set ----

struct RetrievalOptions {
  std::vector<int64_t> ks = {1, 2, 4};
  int64_t query_block = 0;  // rows per block; 0 = from memory_budget_bytes
  int64_t memory_budget_bytes = int64_t{64} << 20;
  int64_t gallery_block = 4096;                   // columns per GEMM tile (CPU only)
  engine::Device device = engine::Device::cpu();  // CUDA: the GPU path above
};

// PML's five ranking metrics averaged per class, then across classes (PML's avg_of_avgs).
struct ClassAverages {
  double precision_at_1 = 0.0;  // recall@1
  double map = 0.0;             // PML mean_average_precision (k = None: the full ranking)
  double map_at_r = 0.0;
  double r_precision = 0.0;
  double mrr = 0.0;
  int64_t classes = 0;  // classes with at least one scored query (the divisor)
};

struct RetrievalResult {
  std::vector<int64_t> ks;
  std::vector<double> recall;  // one per K, fraction in [0, 1]
  double map = 0.0;
  double map_at_r10 = 0.0;
  double map_at_r = 0.0;
  double r_precision = 0.0;
  double mrr = 0.0;
  double precision_at_1 = 0.0;  // recall@1, whatever ks holds
  ClassAverages per_class;
  int64_t queries = 0;       // queries with at least one relevant item (the means' divisor)
  int64_t lone_queries = 0;  // queries left out: no other item has their label
  int64_t query_block = 0;   // the block size used
  engine::Device device = engine::Device::cpu();  // where the ranking ran
};

// labels.size() must equal points.n; ks must be >= 1. All means are NaN when every query is lone.
// A CUDA device that is not present is an engine::Error naming it.
RetrievalResult evaluate_retrieval(const Points& points, const std::vector<int64_t>& labels,
                                   const RetrievalOptions& options = {});

}  // namespace metrics
