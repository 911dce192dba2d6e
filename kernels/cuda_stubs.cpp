// Compiled instead of every *.cu file when the project is built without CUDA (ENGINE_CUDA=OFF or
// no nvcc). Device discovery answers "no devices"; every other CUDA entry point throws, so a CUDA
// code path can never silently fall back to something else. When you add a *_cuda function,
// add its stub here (docs/adding-an-op.md).
#include "kernels/axpy/axpy.h"
#include "kernels/batch_norm/batch_norm.h"
#include "kernels/bench/timer.h"
#include "kernels/binary/binary.h"
#include "kernels/common/check.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/concat/concat.h"
#include "kernels/conv2d/conv2d.h"
#include "kernels/copy/copy.h"
#include "kernels/dropout/dropout.h"
#include "kernels/fill/fill.h"
#include "kernels/index_select/index_select.h"
#include "kernels/knn/knn.h"
#include "kernels/l2_normalize/l2_normalize.h"
#include "kernels/matmul/matmul.h"
#include "kernels/optim/optim.h"
#include "kernels/pairwise_distance/pairwise_distance.h"
#include "kernels/pgd_step/pgd_step.h"
#include "kernels/pool/pool.h"
#include "kernels/random/random.h"
#include "kernels/reduce/reduce.h"
#include "kernels/retrieval/retrieval.h"
#include "kernels/softmax/softmax.h"
#include "kernels/triplet/triplet.h"
#include "kernels/unary/unary.h"

namespace engine::kernels {

namespace {
[[noreturn]] void no_cuda(const char* function) {
  fail(function, ": this binary was built without CUDA (configure with -DENGINE_CUDA=ON)");
}
}  // namespace

// ---- runtime ----
int cuda_device_count() { return 0; }
const char* cuda_device_name(int) { no_cuda("cuda_device_name"); }
int cuda_multiprocessor_count() { no_cuda("cuda_multiprocessor_count"); }
void* cuda_malloc(std::size_t) { no_cuda("cuda_malloc"); }
void cuda_free(void*) { no_cuda("cuda_free"); }
void cuda_memcpy_host_to_device(void*, const void*, std::size_t) {
  no_cuda("cuda_memcpy_host_to_device");
}
void cuda_memcpy_device_to_host(void*, const void*, std::size_t) {
  no_cuda("cuda_memcpy_device_to_host");
}
void cuda_memcpy_device_to_device(void*, const void*, std::size_t) {
  no_cuda("cuda_memcpy_device_to_device");
}
void cuda_memset_zero(void*, std::size_t) { no_cuda("cuda_memset_zero"); }
void* cuda_current_stream() { return nullptr; }
void cuda_set_current_stream(void*) { no_cuda("cuda_set_current_stream"); }
void cuda_trim_workspace_pool() { no_cuda("cuda_trim_workspace_pool"); }
void cuda_synchronize() { no_cuda("cuda_synchronize"); }

// ---- kernels ----
void fill_cuda(float*, int64_t, float) { no_cuda("fill_cuda"); }
void axpy_cuda(int64_t, float, const float*, float*) { no_cuda("axpy_cuda"); }
void copy_strided_cuda(const float*, StridedLayout, float*) { no_cuda("copy_strided_cuda"); }
void copy_into_strided_cuda(const float*, float*, StridedLayout) {
  no_cuda("copy_into_strided_cuda");
}
void random_uniform_cuda(float*, int64_t, uint64_t, uint64_t, float, float) {
  no_cuda("random_uniform_cuda");
}
void random_normal_cuda(float*, int64_t, uint64_t, uint64_t, float, float) {
  no_cuda("random_normal_cuda");
}

// ---- elementwise, reductions, softmax, embeddings, concat, gather ----

void binary_cuda(BinaryOp, const float*, StridedLayout, const float*, StridedLayout, float*,
                 StridedLayout) {
  no_cuda("binary_cuda");
}
void unary_cuda(UnaryOp, const float*, int64_t, UnaryParams, float*) { no_cuda("unary_cuda"); }
void unary_backward_cuda(UnaryOp, const float*, const float*, const float*, int64_t, UnaryParams,
                         float*) {
  no_cuda("unary_backward_cuda");
}
void sum_axis_cuda(const float*, int64_t, int64_t, int64_t, float, float*) {
  no_cuda("sum_axis_cuda");
}
void broadcast_cuda(const float*, StridedLayout, float, float*) { no_cuda("broadcast_cuda"); }
void logsumexp_cuda(const float*, int64_t, int64_t, int64_t, float*) { no_cuda("logsumexp_cuda"); }
void logsumexp_backward_cuda(const float*, const float*, const float*, int64_t, int64_t, int64_t,
                             float*) {
  no_cuda("logsumexp_backward_cuda");
}
void softmax_cuda(const float*, int64_t, int64_t, int64_t, float*) { no_cuda("softmax_cuda"); }
void softmax_backward_cuda(const float*, const float*, int64_t, int64_t, int64_t, float*) {
  no_cuda("softmax_backward_cuda");
}
void log_softmax_cuda(const float*, int64_t, int64_t, int64_t, float*) {
  no_cuda("log_softmax_cuda");
}
void log_softmax_backward_cuda(const float*, const float*, int64_t, int64_t, int64_t, float*) {
  no_cuda("log_softmax_backward_cuda");
}
void cross_entropy_cuda(const float*, const int64_t*, int64_t, int64_t, float*, float*) {
  no_cuda("cross_entropy_cuda");
}
void cross_entropy_backward_cuda(const float*, const int64_t*, const float*, int64_t, int64_t,
                                 const float*, float*) {
  no_cuda("cross_entropy_backward_cuda");
}
void l2_normalize_forward_cuda(const float*, int64_t, int64_t, float, float*, float*) {
  no_cuda("l2_normalize_forward_cuda");
}
void l2_normalize_backward_cuda(const float*, const float*, const float*, int64_t, int64_t, float,
                                float*) {
  no_cuda("l2_normalize_backward_cuda");
}
void pairwise_distance_forward_cuda(const float*, const float*, int64_t, int64_t, int64_t,
                                    PairwiseMetric, float, float*) {
  no_cuda("pairwise_distance_forward_cuda");
}
void pairwise_distance_backward_cuda(const float*, const float*, const float*, int64_t, int64_t,
                                     int64_t, PairwiseMetric, float, float*, float*) {
  no_cuda("pairwise_distance_backward_cuda");
}
void dropout_forward_cuda(const float*, const float*, int64_t, float, float*, float*) {
  no_cuda("dropout_forward_cuda");
}
void dropout_backward_cuda(const float*, const float*, int64_t, float*) {
  no_cuda("dropout_backward_cuda");
}
void concat_cuda(int64_t, const float* const*, const int64_t*, int64_t, float*) {
  no_cuda("concat_cuda");
}
void concat_cuda(int64_t, const int64_t* const*, const int64_t*, int64_t, int64_t*) {
  no_cuda("concat_cuda");
}
void index_select_forward_cuda(const float*, int64_t, int64_t, const int64_t*, int64_t, float*) {
  no_cuda("index_select_forward_cuda");
}
void index_select_forward_cuda(const int64_t*, int64_t, int64_t, const int64_t*, int64_t,
                               int64_t*) {
  no_cuda("index_select_forward_cuda");
}
void index_select_backward_cuda(const float*, const int64_t*, int64_t, int64_t, int64_t, float*) {
  no_cuda("index_select_backward_cuda");
}

// ---- conv2d, pool, matmul ----
void conv2d_fprop_cuda(const Conv2dShape&, const float*, const float*, const float*, float*) {
  no_cuda("conv2d_fprop_cuda");
}
void conv2d_dgrad_cuda(const Conv2dShape&, const float*, const float*, float*) {
  no_cuda("conv2d_dgrad_cuda");
}
void conv2d_dgrad_direct_cuda(const Conv2dShape&, const float*, const float*, float*) {
  no_cuda("conv2d_dgrad_direct_cuda");
}
int64_t conv2d_wgrad_cuda_workspace_size(const Conv2dShape&) {
  no_cuda("conv2d_wgrad_cuda_workspace_size");
}
void conv2d_wgrad_cuda(const Conv2dShape&, const float*, const float*, float*, float*, float*) {
  no_cuda("conv2d_wgrad_cuda");
}
void max_pool2d_forward_cuda(const Pool2dShape&, const float*, float*) {
  no_cuda("max_pool2d_forward_cuda");
}
void max_pool2d_backward_cuda(const Pool2dShape&, const float*, const float*, float*) {
  no_cuda("max_pool2d_backward_cuda");
}
void avg_pool2d_forward_cuda(const Pool2dShape&, const float*, float*) {
  no_cuda("avg_pool2d_forward_cuda");
}
void avg_pool2d_backward_cuda(const Pool2dShape&, const float*, float*) {
  no_cuda("avg_pool2d_backward_cuda");
}
void adaptive_avg_pool2d_forward_cuda(int64_t, int64_t, const float*, float*) {
  no_cuda("adaptive_avg_pool2d_forward_cuda");
}
void adaptive_avg_pool2d_backward_cuda(int64_t, int64_t, const float*, float*) {
  no_cuda("adaptive_avg_pool2d_backward_cuda");
}
void matmul_cuda(int64_t, int64_t, int64_t, const float*, const float*, bool, bool, float*, bool) {
  no_cuda("matmul_cuda");
}
SplitK matmul_cuda_splits(int64_t, int64_t, int64_t) { no_cuda("matmul_cuda_splits"); }
void matmul_cublas(int64_t, int64_t, int64_t, const float*, const float*, bool, bool, float*,
                   bool) {
  no_cuda("matmul_cublas");
}
void add_row_bias_cuda(int64_t, int64_t, const float*, float*) { no_cuda("add_row_bias_cuda"); }
void column_sums_cuda(int64_t, int64_t, const float*, float*) { no_cuda("column_sums_cuda"); }

// ---- benchmark timing ----
void* cuda_event_create() { no_cuda("cuda_event_create"); }
void cuda_event_destroy(void*) { no_cuda("cuda_event_destroy"); }
void cuda_event_record(void*) { no_cuda("cuda_event_record"); }
float cuda_event_elapsed_ms(void*, void*) { no_cuda("cuda_event_elapsed_ms"); }
int64_t cuda_l2_cache_bytes() { no_cuda("cuda_l2_cache_bytes"); }

// ---- batch_norm ----
void batch_norm_forward_train_cuda(const BatchNormShape&, const float*, const float*, const float*,
                                   float, float, float*, float*, float*, float*, float*) {
  no_cuda("batch_norm_forward_train_cuda");
}
void batch_norm_forward_eval_cuda(const BatchNormShape&, const float*, const float*, const float*,
                                  const float*, const float*, float, float*, float*, float*) {
  no_cuda("batch_norm_forward_eval_cuda");
}
void batch_norm_backward_cuda(const BatchNormShape&, bool, const float*, const float*, const float*,
                              const float*, const float*, float*, float*, float*) {
  no_cuda("batch_norm_backward_cuda");
}

// ---- optimizers ----
void sgd_update_multi_cuda(const SgdTensorRef*, int64_t, const SgdHyper&) {
  no_cuda("sgd_update_multi_cuda");
}
void adam_update_multi_cuda(const AdamTensorRef*, int64_t, const AdamHyper&) {
  no_cuda("adam_update_multi_cuda");
}

// ---- pgd_step ----
void pgd_step_cuda(int64_t, const float*, const float*, const float*, float, float, float*,
                   float*) {
  no_cuda("pgd_step_cuda");
}

// ---- fused triplet loss, k-NN ----
void fused_triplet_cuda(const float*, const int64_t*, int64_t, int64_t, Miner, Metric, double,
                        uint64_t, uint64_t, float*, float*, int64_t*, int64_t*, int64_t*, float*) {
  no_cuda("fused_triplet_cuda");
}
void knn_self_cuda(const float*, const float*, int64_t, int64_t, KnnKey, int64_t, const KnnTiling&,
                   int64_t*, float*) {
  no_cuda("knn_self_cuda");
}

// ---- retrieval ranking ----
void rank_query_block_cuda(const float*, int64_t, int64_t, int64_t, const ClassLayout&,
                           QueryRanking*) {
  no_cuda("rank_query_block_cuda");
}
void retrieval_key_tile_cuda(const float*, const float*, int64_t, int64_t, RankingKey, int64_t,
                             int64_t, float*) {
  no_cuda("retrieval_key_tile_cuda");
}

}  // namespace engine::kernels
