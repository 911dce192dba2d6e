// retrieval_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/retrieval/retrieval.h"

namespace engine::kernels {

void rank_query_block_cuda(const float*, int64_t, int64_t, int64_t, const ClassLayout&,
                           QueryRanking*) {
  no_cuda("rank_query_block_cuda");
}

void retrieval_key_tile_cuda(const float*, const float*, int64_t, int64_t, RankingKey, int64_t,
                             int64_t, float*) {
  no_cuda("retrieval_key_tile_cuda");
}

}  // namespace engine::kernels
