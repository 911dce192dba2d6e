// The processes of one run and the collectives between them (docs/distributed.md).
//
// `mpirun -n N dml ...` starts N processes, one per device; this layer says which one this is
// (rank, size, and the rank among the processes of the same machine, which picks the CUDA device)
// and carries the collectives on host buffers over MPI (Debian's Open MPI). A process not started
// by an MPI launcher is a world of one: rank 0 of 1, every collective a copy or nothing, and MPI is
// never initialized. Without MPI at build time (communicator_absent.cpp) every process is such a
// world, and a process started by mpirun says so instead of running N copies of the same work.
//
// A collective that waits on a rank that died or stalled does not wait forever: a watchdog ends
// the process (exit code 1, with a message naming the collective) when one collective waits longer
// than DML_DIST_TIMEOUT_S seconds (default 600), and mpirun then ends the other ranks. MPI's own
// errors are returned (MPI_ERRORS_RETURN) and thrown as engine::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace engine::dist {

struct World {
  int rank = 0;        // 0 .. size-1; rank 0 logs, shows progress and writes files
  int size = 1;        // number of processes
  int local_rank = 0;  // among the processes on this machine: the CUDA device it uses
  int local_size = 1;
  bool launched_by_mpi = false;  // started by mpirun (or a scheduler's MPI launcher)
};

// The world of this process, found (and MPI initialized, when launched by mpirun) at the first
// call. MPI is finalized when the program ends.
const World& world();

// True when this program was built with MPI (otherwise every process is a world of one).
bool built_with_mpi();

// Seconds one collective may wait before the watchdog ends the process: DML_DIST_TIMEOUT_S, or
// 600. Throws engine::Error naming the variable when it is not a positive number.
double collective_timeout_seconds();

// Element-wise sum over the ranks, in place. The order of the additions is MPI's (it depends on
// the world's size and the buffer's size), so a float sum may differ in its last bits from a
// serial sum; integer sums are exact.
void all_reduce_sum(float* data, size_t count);
void all_reduce_sum(double* data, size_t count);
void all_reduce_sum(int64_t* data, size_t count);

// A sum over the ranks, in place, that runs while this rank goes on (MPI_Iallreduce): started by
// start_all_reduce_sum, complete when wait_all_reduce_sum(id) returns; `data` must be neither read
// nor written in between. These sums travel on a communicator of their own (a duplicate of the
// world's), so every rank must start them in the same order as each other, but blocking
// collectives (a synchronized batch norm's, during a backward) may run while they are in flight.
// With two ranks each element is a + b, as all_reduce_sum gives; with more, Open MPI's
// non-blocking algorithms may order the additions differently from its blocking ones. The wait is
// under the watchdog; a world of one has nothing to do (id 0).
int64_t start_all_reduce_sum(float* data, size_t count);
void wait_all_reduce_sum(int64_t id);

// Every rank's `count` values, concatenated in rank order, on every rank.
std::vector<float> all_gather(const float* data, size_t count);
std::vector<int64_t> all_gather(const int64_t* data, size_t count);
// As above, with a count that may differ per rank.
std::vector<float> all_gather_varying(const std::vector<float>& data);
std::vector<double> all_gather_varying(const std::vector<double>& data);
std::vector<int64_t> all_gather_varying(const std::vector<int64_t>& data);
std::vector<char> all_gather_varying(const std::vector<char>& data);

// root's `bytes` bytes, copied to every rank.
void broadcast(void* data, size_t bytes, int root);

void barrier();

// The half-open range [begin, end) of `total` items (queries, batches) that `rank` of `size`
// takes: contiguous, in rank order, the first total % size ranks one item more.
struct Share {
  int64_t begin = 0;
  int64_t end = 0;
};
Share share_of(int64_t total, int rank, int size);

// The CUDA device (ordinal among the `visible_gpus` this process sees) that rank `w` computes on:
// its rank among the processes of its machine, one GPU per process, as NCCL requires. Throws
// engine::Error naming the counts when the machine runs more ranks than it shows GPUs.
int rank_cuda_device(const World& w, int visible_gpus);

}  // namespace engine::dist
