// Collectives on device buffers over NCCL, for a CUDA build with MPI and NCCL
// (docs/distributed.md). NCCL's communicator is bootstrapped over MPI: rank 0 makes the unique id,
// MPI broadcasts it. Each rank uses the CUDA device numbered by its local rank
// (engine/dist/communicator.h).
#pragma once

#include <cstddef>

namespace engine::dist {

// Whether this program was built with NCCL (a CUDA build that found nccl.h and libnccl).
bool built_with_nccl();

// Selects this rank's device and creates the NCCL communicator of the world, once; later calls
// do nothing. Throws engine::Error when the build has no NCCL.
void start_nccl();

// Element-wise sum of `count` floats of device memory over the ranks, in place, on `stream` (a
// cudaStream_t; nullptr: the default stream); returns when the sum is complete, or throws.
void nccl_all_reduce_sum(float* device_data, size_t count, void* stream);

// The same sum started on a stream of its own, after the work queued so far on `compute_stream`
// (an event; nullptr: the default stream), returning at once: a bucket of gradients is summed
// while the backward goes on (tools/dml/data_parallel.cpp). nccl_wait_all_reduce_sums() returns
// when every sum started so far is complete.
void nccl_start_all_reduce_sum(float* device_data, size_t count, void* compute_stream);
void nccl_wait_all_reduce_sums();

}  // namespace engine::dist
