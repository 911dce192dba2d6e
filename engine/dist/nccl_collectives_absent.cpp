// engine/dist/nccl_collectives.h without NCCL (a CPU build, or no nccl.h / libnccl / MPI).
#include "engine/dist/nccl_collectives.h"

#include "kernels/common/check.h"

namespace engine::dist {

bool built_with_nccl() { return false; }

void start_nccl() {
  engine::fail("built without NCCL: device collectives need a CUDA build with NCCL and MPI");
}

void nccl_all_reduce_sum(float*, size_t, void*) { start_nccl(); }
void nccl_start_all_reduce_sum(float*, size_t, void*) { start_nccl(); }
void nccl_wait_all_reduce_sums() { start_nccl(); }

}  // namespace engine::dist
