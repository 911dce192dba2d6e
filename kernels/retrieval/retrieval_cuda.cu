// The ranking step of the retrieval metrics, CUDA (contract, math, algorithm and cost in
// retrieval.h; the oracle is rank_query_block_cpu), and the key tile by cuBLAS.
//
// Math: per query q of the block, the 1-based positions pos_1 < ... < pos_R of its R relevant
//   items in the (key, index) order of the items j != q, reduced to first_position, AP, AP@10,
//   AP@R and R-precision (f64 sums, k ascending: the same bits as the twin).
// Layout: keys [rows, n] f32 row-major (row r is query q0 + r); classes as in ClassLayout (i64);
//   out [rows] QueryRanking. Workspace (stream-ordered allocations, freed before returning):
//   slot_offsets [rows + 1] i64 -- row r owns slots [slot_offsets[r], slot_offsets[r + 1]), one
//   per member of its class -- then per slot a 64-bit word unsorted and sorted and a u32 count,
//   then CUB's temporary storage.
// Parallelization: slot scan one 1024-thread block; gather one 256-thread block per row; CUB's
//   segmented sort; count one thread per (row, item), blocks of 256 threads x 4096 items of one
//   row (rows x chunks blocks on a 1-D grid); score one thread per row; the key pass 256 threads
//   x 4096 columns of one row per block.
// Determinism: the histogram counts are integer atomics; every float sum is one thread's, in a
//   fixed order.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <cub/device/device_segmented_sort.cuh>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/cuda_workspace.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/matmul/matmul.h"
#include "kernels/retrieval/retrieval.h"

namespace engine::kernels {
namespace {

constexpr uint64_t kSelfWord = ~uint64_t{0};  // the query's own slot: sorts after every item
constexpr int kScanThreads = 1024;
constexpr int kGatherThreads = 256;
constexpr int kCountThreads = 256;
constexpr int64_t kItemsPerCountBlock = 4096;
constexpr int kSharedThresholds = 2048;  // 16 KiB of words + 8 KiB of counts per count block
constexpr int kScoreThreads = 128;
constexpr int kKeyThreads = 256;
constexpr int64_t kColumnsPerKeyBlock = 4096;
// (key, index) as one word whose unsigned order is the ranking order: the key's bits mapped so
// that unsigned order is float order (negative keys flipped whole, positive ones get the sign bit
// set), above the index. -0 becomes +0 first: the two tie, and then the index decides, as in
// the twin's float comparison. Keys are finite, so no word equals kSelfWord.
__device__ inline uint64_t rank_word(float key, int64_t index) {
  uint32_t bits = __float_as_uint(key);
  if (bits == 0x80000000u) bits = 0u;
  const uint32_t ordered = (bits & 0x80000000u) != 0u ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(ordered) << 32) | static_cast<uint32_t>(index);
}

// #{k < count : sorted[k] <= word} for an ascending array.
__device__ inline int count_at_most(const uint64_t* sorted, int count, uint64_t word) {
  int low = 0;
  int length = count;
  while (length > 0) {
    const int half = length / 2;
    if (sorted[low + half] <= word) {
      low += half + 1;
      length -= half + 1;
    } else {
      length = half;
    }
  }
  return low;
}

// Step 1: slot_offsets[r + 1] = the class sizes of rows 0..r summed. One block: each tile of
// kScanThreads rows is scanned in shared memory (Hillis-Steele: log2(kScanThreads) steps), plus
// the total of the tiles before it.
__global__ void __launch_bounds__(kScanThreads)
    slot_offsets_kernel(int64_t q0, int64_t rows, const int64_t* class_of,
                        const int64_t* class_offsets, int64_t* slot_offsets) {
  __shared__ int64_t partial[kScanThreads];
  const int t = threadIdx.x;
  if (t == 0) slot_offsets[0] = 0;
  int64_t carry = 0;  // the same in every thread
  for (int64_t tile = 0; tile < rows; tile += kScanThreads) {
    const int64_t r = tile + t;
    int64_t size = 0;
    if (r < rows) {
      const int64_t c = class_of[q0 + r];
      size = class_offsets[c + 1] - class_offsets[c];
    }
    partial[t] = size;
    __syncthreads();
    for (int offset = 1; offset < kScanThreads; offset *= 2) {
      const int64_t add = t >= offset ? partial[t - offset] : 0;
      __syncthreads();
      partial[t] += add;
      __syncthreads();
    }
    if (r < rows) slot_offsets[r + 1] = carry + partial[t];
    carry += partial[kScanThreads - 1];
    __syncthreads();  // everyone has read partial before the next tile writes it
  }
}

// Step 2: one block per row; the words of the row's class members, the query's own as kSelfWord.
__global__ void __launch_bounds__(kGatherThreads)
    gather_kernel(const float* keys, int64_t n, int64_t q0, const int64_t* class_of,
                  const int64_t* class_offsets, const int64_t* class_members,
                  const int64_t* slot_offsets, uint64_t* words, unsigned* counts) {
  const int64_t r = blockIdx.x;
  const int64_t query = q0 + r;
  const int64_t c = class_of[query];
  const int64_t first_member = class_offsets[c];
  const int64_t members = class_offsets[c + 1] - first_member;
  const int64_t begin = slot_offsets[r];
  const float* row = keys + r * n;
  for (int64_t m = threadIdx.x; m < members; m += blockDim.x) {
    const int64_t item = class_members[first_member + m];
    words[begin + m] = item == query ? kSelfWord : rank_word(row[item], item);
    counts[begin + m] = 0u;
  }
}

// Step 4: block b covers row b / chunks, items [chunk * 4096, chunk * 4096 + 4096).
// counts[p] of a row = #{j != q : p(j) = p} for p < R, p(j) = #{thresholds <= word(j)}.
__global__ void __launch_bounds__(kCountThreads)
    count_kernel(const float* keys, int64_t n, int64_t q0, int64_t chunks,
                 const int64_t* slot_offsets, const uint64_t* sorted, unsigned* counts) {
  __shared__ uint64_t shared_thresholds[kSharedThresholds];
  __shared__ unsigned shared_counts[kSharedThresholds];
  const int64_t r = blockIdx.x / chunks;
  const int64_t chunk = blockIdx.x - r * chunks;
  const int64_t begin = slot_offsets[r];
  const int relevant = static_cast<int>(slot_offsets[r + 1] - begin - 1);
  if (relevant == 0) return;  // a lone query: the whole block leaves together
  const bool in_shared = relevant <= kSharedThresholds;
  const uint64_t* thresholds = sorted + begin;
  unsigned* row_counts = counts + begin;
  if (in_shared) {
    for (int i = threadIdx.x; i < relevant; i += blockDim.x) {
      shared_thresholds[i] = thresholds[i];
      shared_counts[i] = 0u;
    }
    __syncthreads();
    thresholds = shared_thresholds;
    row_counts = shared_counts;
  }
  const uint64_t last = thresholds[relevant - 1];
  const int64_t query = q0 + r;
  const float* row = keys + r * n;
  const int64_t j0 = chunk * kItemsPerCountBlock;
  const int64_t j1 = n < j0 + kItemsPerCountBlock ? n : j0 + kItemsPerCountBlock;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    if (j == query) continue;  // self excluded by index
    const uint64_t word = rank_word(row[j], j);
    if (word >= last) continue;  // p(j) = R: precedes no relevant item
    atomicAdd(&row_counts[count_at_most(thresholds, relevant, word)], 1u);
  }
  if (in_shared) {
    __syncthreads();
    for (int i = threadIdx.x; i < relevant; i += blockDim.x) {
      if (shared_counts[i] != 0u) atomicAdd(&counts[begin + i], shared_counts[i]);
    }
  }
}

// Step 5: one thread per row. pos_k (k 0-based) = 1 + counts[0] + ... + counts[k].
__global__ void score_kernel(const int64_t* slot_offsets, const unsigned* counts, int64_t rows,
                             QueryRanking* out) {
  const int64_t r = grid_thread_index();
  if (r >= rows) return;
  const int64_t begin = slot_offsets[r];
  const int64_t relevant = slot_offsets[r + 1] - begin - 1;
  QueryRanking s{0, 0.0, 0.0, 0.0, 0.0};
  if (relevant > 0) {
    int64_t before = 0, hits_in_first_r = 0;
    double ap = 0.0, ap_10 = 0.0, ap_r = 0.0;
    for (int64_t k = 0; k < relevant; ++k) {
      before += counts[begin + k];
      const int64_t position = before + 1;
      if (k == 0) s.first_position = position;
      const double precision = static_cast<double>(k + 1) / static_cast<double>(position);
      ap += precision;
      if (position <= 10) ap_10 += precision;
      if (position <= relevant) {
        ap_r += precision;
        ++hits_in_first_r;
      }
    }
    s.average_precision = ap / static_cast<double>(relevant);
    s.ap_at_10 = ap_10 / 10.0;
    s.ap_at_r = ap_r / static_cast<double>(relevant);
    s.r_precision = static_cast<double>(hits_in_first_r) / static_cast<double>(relevant);
  }
  out[r] = s;
}

// Dot products -> keys in place; block b covers row b / chunks, 4096 columns.
__global__ void __launch_bounds__(kKeyThreads)
    keys_from_dots_kernel(float* tile, int64_t n, int64_t q0, int64_t chunks, const float* sq_norms,
                          RankingKey key) {
  const int64_t r = blockIdx.x / chunks;
  const int64_t chunk = blockIdx.x - r * chunks;
  const int64_t j0 = chunk * kColumnsPerKeyBlock;
  const int64_t j1 = n < j0 + kColumnsPerKeyBlock ? n : j0 + kColumnsPerKeyBlock;
  float* row = tile + r * n;
  const float sq_query = sq_norms[q0 + r];
  for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const float dot = row[j];
    row[j] = key == RankingKey::Cosine ? 1.0f - dot
                                       : fmaxf(fmaf(-2.0f, dot, sq_query + sq_norms[j]), 0.0f);
  }
}

}  // namespace

void rank_query_block_cuda(const float* keys, int64_t n, int64_t q0, int64_t rows,
                           const ClassLayout& classes, QueryRanking* out) {
  ENGINE_CHECK(q0 >= 0 && rows >= 1 && q0 + rows <= n, "rank_query_block_cuda: queries [", q0, ", ",
               q0 + rows, ") must be a non-empty range of the ", n, " items");
  ENGINE_CHECK(n <= INT_MAX, "rank_query_block_cuda: n = ", n,
               " items; indices must fit 32 bits of a sort word");
  ENGINE_CHECK(classes.classes >= 1, "rank_query_block_cuda: ", classes.classes, " classes");
  const int64_t chunks = ceil_div(n, kItemsPerCountBlock);
  ENGINE_CHECK(rows * chunks <= INT_MAX, "rank_query_block_cuda: ", rows, " rows x ", chunks,
               " chunks of items exceed the grid");
  cudaStream_t stream = current_stream();

  // 1. slots, and their total back on the host to size the rest of the workspace.
  StreamWorkspace offsets_memory(sizeof(int64_t) * static_cast<size_t>(rows + 1), stream,
                                 "rank_query_block_cuda slot offsets for ", rows, " rows");
  int64_t* slot_offsets = reinterpret_cast<int64_t*>(offsets_memory.bytes());
  slot_offsets_kernel<<<1, kScanThreads, 0, stream>>>(q0, rows, classes.class_of,
                                                      classes.class_offsets, slot_offsets);
  CUDA_CHECK_LAUNCH("rank_query_block_cuda slots: queries [", q0, ", ", q0 + rows, ")");
  int64_t slots = 0;
  CUDA_CHECK(
      cudaMemcpyAsync(&slots, slot_offsets + rows, sizeof(int64_t), cudaMemcpyDeviceToHost, stream),
      "rank_query_block_cuda slot count");
  CUDA_CHECK(cudaStreamSynchronize(stream), "rank_query_block_cuda slot count");
  ENGINE_CHECK(slots >= rows && slots <= rows * n, "rank_query_block_cuda: ", slots, " slots for ",
               rows, " rows of ", n, " items: the class layout is inconsistent");
  // CUB's segmented sort counts items in 32 bits.
  ENGINE_CHECK(slots <= INT_MAX, "rank_query_block_cuda: ", rows, " rows need ", slots,
               " (query, class member) slots, more than 2^31 - 1: use a smaller query block");

  size_t sort_bytes = 0;
  CUDA_CHECK(
      cub::DeviceSegmentedSort::SortKeys(nullptr, sort_bytes, static_cast<const uint64_t*>(nullptr),
                                         static_cast<uint64_t*>(nullptr), slots, rows, slot_offsets,
                                         slot_offsets + 1, stream),
      "rank_query_block_cuda sort size for ", slots, " slots");
  const size_t words_bytes = workspace_aligned(sizeof(uint64_t) * static_cast<size_t>(slots));
  const size_t counts_bytes = workspace_aligned(sizeof(unsigned) * static_cast<size_t>(slots));
  const size_t workspace_bytes = 2 * words_bytes + counts_bytes + workspace_aligned(sort_bytes);
  StreamWorkspace workspace_memory(workspace_bytes, stream, "rank_query_block_cuda (", slots,
                                   " slots for ", rows, " rows)");
  char* workspace = workspace_memory.bytes();
  uint64_t* words = reinterpret_cast<uint64_t*>(workspace);
  uint64_t* sorted = reinterpret_cast<uint64_t*>(workspace + words_bytes);
  unsigned* counts = reinterpret_cast<unsigned*>(workspace + 2 * words_bytes);
  void* sort_storage = workspace + 2 * words_bytes + counts_bytes;

  // 2. gather, 3. sort, 4. count, 5. score.
  gather_kernel<<<static_cast<unsigned>(rows), kGatherThreads, 0, stream>>>(
      keys, n, q0, classes.class_of, classes.class_offsets, classes.class_members, slot_offsets,
      words, counts);
  CUDA_CHECK_LAUNCH("rank_query_block_cuda gather: queries [", q0, ", ", q0 + rows, ")");
  CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(sort_storage, sort_bytes,
                                                static_cast<const uint64_t*>(words), sorted, slots,
                                                rows, slot_offsets, slot_offsets + 1, stream),
             "rank_query_block_cuda sort of ", slots, " slots in ", rows, " rows");
  count_kernel<<<static_cast<unsigned>(rows * chunks), kCountThreads, 0, stream>>>(
      keys, n, q0, chunks, slot_offsets, sorted, counts);
  CUDA_CHECK_LAUNCH("rank_query_block_cuda count: queries [", q0, ", ", q0 + rows, ") x ", n,
                    " items");
  score_kernel<<<static_cast<unsigned>(ceil_div(rows, kScoreThreads)), kScoreThreads, 0, stream>>>(
      slot_offsets, counts, rows, out);
  CUDA_CHECK_LAUNCH("rank_query_block_cuda score: ", rows, " rows");
  workspace_memory.release("rank_query_block_cuda workspace free");
  offsets_memory.release("rank_query_block_cuda slot offsets free");
}

void retrieval_key_tile_cuda(const float* points, const float* sq_norms, int64_t n, int64_t d,
                             RankingKey key, int64_t q0, int64_t rows, float* keys) {
  ENGINE_CHECK(d >= 1 && q0 >= 0 && rows >= 1 && q0 + rows <= n, "retrieval_key_tile_cuda: rows [",
               q0, ", ", q0 + rows, ") of points [", n, ", ", d, "]");
  const int64_t chunks = ceil_div(n, kColumnsPerKeyBlock);
  ENGINE_CHECK(rows * chunks <= INT_MAX, "retrieval_key_tile_cuda: ", rows, " rows x ", chunks,
               " chunks of columns exceed the grid");
  matmul_cublas(rows, n, d, points + q0 * d, points, false, true, keys, false);
  keys_from_dots_kernel<<<static_cast<unsigned>(rows * chunks), kKeyThreads, 0, current_stream()>>>(
      keys, n, q0, chunks, sq_norms, key);
  CUDA_CHECK_LAUNCH("retrieval_key_tile_cuda keys: rows [", q0, ", ", q0 + rows, ") x ", n);
}

}  // namespace engine::kernels
