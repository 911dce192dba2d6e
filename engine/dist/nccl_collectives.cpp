// engine/dist/nccl_collectives.h with NCCL (compiled only in a CUDA build that found NCCL and
// MPI). On a machine without a GPU this file is compiled and linked, never run.
#include "engine/dist/nccl_collectives.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "engine/dist/communicator.h"
#include "kernels/common/check.h"

namespace engine::dist {

namespace {

void check_nccl(ncclResult_t result, const char* what) {
  ENGINE_CHECK(result == ncclSuccess, "NCCL ", what, " failed: ", ncclGetErrorString(result));
}

void check_cuda(cudaError_t error, const char* what) {
  ENGINE_CHECK(error == cudaSuccess, what, " failed: ", cudaGetErrorString(error));
}

ncclComm_t& communicator() {
  static ncclComm_t comm = nullptr;
  return comm;
}

// The stream of the sums that overlap other work, and the event it waits on, made once.
struct SideStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t queued = nullptr;
};

SideStream& side_stream() {
  static SideStream side;
  if (side.stream == nullptr) {
    check_cuda(cudaStreamCreateWithFlags(&side.stream, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags (NCCL's side stream)");
    check_cuda(cudaEventCreateWithFlags(&side.queued, cudaEventDisableTiming),
               "cudaEventCreateWithFlags");
  }
  return side;
}

}  // namespace

bool built_with_nccl() { return true; }

void start_nccl() {
  if (communicator() != nullptr) return;
  const World& w = world();
  // The rank's GPU was made current when its device was chosen (engine::dist::rank_cuda_device);
  // a communicator on another device than the rank's tensors would fail inside NCCL.
  int current = -1;
  check_cuda(cudaGetDevice(&current), "cudaGetDevice");
  ENGINE_CHECK(current == w.local_rank, "NCCL: rank ", w.rank, " computes on GPU ", current,
               " but its local rank is ", w.local_rank, " (one GPU per rank)");
  ncclUniqueId id;
  if (w.rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  broadcast(&id, sizeof id, 0);
  check_nccl(ncclCommInitRank(&communicator(), w.size, id, w.rank), "ncclCommInitRank");
}

void nccl_all_reduce_sum(float* device_data, size_t count, void* stream) {
  start_nccl();
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  check_nccl(
      ncclAllReduce(device_data, device_data, count, ncclFloat32, ncclSum, communicator(), s),
      "ncclAllReduce");
  check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize after ncclAllReduce");
}

void nccl_start_all_reduce_sum(float* device_data, size_t count, void* compute_stream) {
  start_nccl();
  SideStream& side = side_stream();
  check_cuda(cudaEventRecord(side.queued, static_cast<cudaStream_t>(compute_stream)),
             "cudaEventRecord (the gradients written)");
  check_cuda(cudaStreamWaitEvent(side.stream, side.queued, 0), "cudaStreamWaitEvent");
  check_nccl(ncclAllReduce(device_data, device_data, count, ncclFloat32, ncclSum, communicator(),
                           side.stream),
             "ncclAllReduce (side stream)");
}

void nccl_wait_all_reduce_sums() {
  check_cuda(cudaStreamSynchronize(side_stream().stream),
             "cudaStreamSynchronize after the side stream's ncclAllReduce");
}

}  // namespace engine::dist
