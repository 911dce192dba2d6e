// The ranking step of the retrieval metrics (metrics/retrieval.h) for one block of queries, as a
// kernel: a CPU twin (the oracle, written plainly) and a CUDA version; plus the CUDA key tile.
//
// Math: a set of n items; query q's ranking is every item j != q (self excluded BY INDEX) in
//   ascending (key(q, j), j) order -- an exact tie goes to the smaller index. Its relevant items
//   are the R other members of q's class; pos_1 < ... < pos_R are their 1-based positions:
//     first_position      pos_1 (0 when R = 0: a "lone" query)
//     average_precision   (1/R)  sum_{k=1..R} k / pos_k
//     ap_at_10            (1/10) sum_{k: pos_k <= 10} k / pos_k   (robrank's map_at_r10)
//     ap_at_r             (1/R)  sum_{k: pos_k <= R} k / pos_k    (PML's map_at_r)
//     r_precision         (1/R)  #{k : pos_k <= R}                (PML's r_precision)
//   Every sum runs in f64 over k ascending, so both versions produce the very same bits from the
//   same positions (recall@K of the query is first_position <= K, done by the caller).
// Layout: keys [rows, n] row-major f32: keys[r * n + j] = key(q0 + r, j) for queries
//   q0 .. q0 + rows - 1. Classes (ClassLayout) as metrics::group_by_label gives them: class_of [n],
//   class_offsets [classes + 1], class_members [n] (each class's items ascending). One
//   QueryRanking per row out.
// CUDA algorithm (retrieval_cuda.cu), per block of rows, in stream order:
//   1. slots: row r owns s_r = |class of q| slots (its R relevant items plus one for the query);
//      one thread block scans them, the total comes back to the host (the one synchronization,
//      to size the workspace: 20 bytes per slot, 8 per row).
//   2. gather: one thread block per row writes each relevant item's (key, index) as one 64-bit
//      word -- the key's bits mapped to an unsigned order (-0 taken as +0) above the index -- so
//      the (key, index) order is plain integer order and every word is distinct; the query's own
//      slot gets UINT64_MAX. Zeroes the row's histogram.
//   3. sort: CUB's segmented sort of each row's words: thresholds t_1 < ... < t_R, then the
//      sentinel.
//   4. count: one thread per (row, item) pair, 4096 items per 256-thread block: p(j) = #{t_k <=
//      word(j)} by binary search; items at or beyond t_R (p = R) are skipped with one comparison,
//      the rest add 1 to hist[p(j)] (integer atomics: deterministic). With R <= 2048 the block
//      keeps the thresholds and its histogram in shared memory and adds it to the row's at the end.
//   5. score: one thread per row: pos_k = 1 + sum_{p < k} hist[p] (k 1-based: item j precedes the
//      k-th relevant item iff p(j) < k), and the sums and the count above, k ascending.
// Parallelization: rows x items in the count (the hot loop); rows in gather and score.
// Cost per block of B rows: B n comparisons + at most B n log2(R + 1) in the binary searches and
//   B n atomic adds; the sort is sum_r R log R; reads 4 B n bytes of keys (plus 16 B R for the
//   thresholds). With the key tiles, the whole set is 2 n^2 d GEMM FLOPs (the floor: 1e13 for
//   n = 100k, d = 512) and 12 n^2 bytes of tile traffic (the GEMM's write, the key pass, the
//   count).
// Memory: the caller's B x n key tile + 20 bytes per slot (at most B n slots, B (R + 1) typically)
//   + 8 bytes per row + CUB's temporary storage: never n x n.
#pragma once

#include <cstdint>

namespace engine::kernels {

// Per query of the block; `first_position` 0 marks a lone query (all sums then 0).
struct QueryRanking {
  int64_t first_position;
  double average_precision;
  double ap_at_10;
  double ap_at_r;
  double r_precision;
};

// The labels as classes (pointers to host memory for the CPU twin, device memory for CUDA).
struct ClassLayout {
  const int64_t* class_of;       // [n]: class id, in [0, classes)
  const int64_t* class_offsets;  // [classes + 1]: class c is class_members[offsets[c] .. [c + 1])
  const int64_t* class_members;  // [n]: item indices, ascending within each class
  int64_t classes;
};

// Ranks queries q0 .. q0 + rows - 1 from their key rows. Needs 0 <= q0, 1 <= rows, q0 + rows <= n
// (engine::Error otherwise). Host pointers; O(rows R n): the oracle for small sets. Checks that
// every query belongs to its class's member list.
void rank_query_block_cpu(const float* keys, int64_t n, int64_t q0, int64_t rows,
                          const ClassLayout& classes, QueryRanking* out);

// The same with device pointers, on the current stream. n < 2^31 (indices live in 32 bits of a
// sort word) and fewer than 2^31 (query, class member) pairs in the block (CUB's item count).
// Synchronizes once (the slot count, step 1 above).
void rank_query_block_cuda(const float* keys, int64_t n, int64_t q0, int64_t rows,
                           const ClassLayout& classes, QueryRanking* out);

enum class RankingKey { SquaredEuclidean, Cosine };

// keys[r * n + j] = key(q0 + r, j) for r < rows, j < n, from prepared points [n, d] and their
// squared norms [n] (metrics/distance.h): max(s_q + s_j - 2 <p_q, p_j>, 0) for SquaredEuclidean,
// 1 - <p_q, p_j> for Cosine. One cuBLAS SGEMM (strict FP32) then one elementwise pass. Device
// pointers, current stream. The CPU equivalent is metrics::key_tile.
void retrieval_key_tile_cuda(const float* points, const float* sq_norms, int64_t n, int64_t d,
                             RankingKey key, int64_t q0, int64_t rows, float* keys);

}  // namespace engine::kernels
