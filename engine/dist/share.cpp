// The split of work over ranks (header: engine/dist/communicator.h); built with or without MPI.
#include <algorithm>

#include "engine/dist/communicator.h"
#include "kernels/common/check.h"

namespace engine::dist {

Share share_of(int64_t total, int rank, int size) {
  ENGINE_CHECK(size > 0 && rank >= 0 && rank < size, "share_of: rank ", rank, " of ", size);
  ENGINE_CHECK(total >= 0, "share_of: negative total ", total);
  const int64_t base = total / size;
  const int64_t extra = total % size;
  Share share;
  share.begin = rank * base + std::min<int64_t>(rank, extra);
  share.end = share.begin + base + (rank < extra ? 1 : 0);
  return share;
}

int rank_cuda_device(const World& w, int visible_gpus) {
  ENGINE_CHECK(w.local_rank >= 0 && w.local_rank < w.local_size, "rank_cuda_device: local rank ",
               w.local_rank, " of ", w.local_size);
  ENGINE_CHECK(w.local_rank < visible_gpus, "rank ", w.rank, " is process ", w.local_rank + 1,
               " of ", w.local_size, " on its machine, which shows ", visible_gpus,
               " CUDA device(s): start at most one rank per GPU (mpirun -n / --map-by), or run on "
               "cpu");
  return w.local_rank;
}

}  // namespace engine::dist
