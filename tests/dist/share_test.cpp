// The split of work over ranks and the world of a process not started by mpirun
// (engine/dist/communicator.h). The collectives between ranks: mpi_collectives.sh.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "engine/dist/communicator.h"
#include "kernels/common/check.h"

using engine::dist::share_of;

TEST_CASE("share_of: contiguous shares in rank order, the first total % size one larger") {
  // 10 items over 4 ranks: 3, 3, 2, 2 -> [0,3) [3,6) [6,8) [8,10).
  const int64_t begins[] = {0, 3, 6, 8};
  const int64_t ends[] = {3, 6, 8, 10};
  for (int r = 0; r < 4; ++r) {
    CHECK(share_of(10, r, 4).begin == begins[r]);
    CHECK(share_of(10, r, 4).end == ends[r]);
  }
  // Fewer items than ranks: 2 over 3 -> [0,1) [1,2) [2,2).
  CHECK(share_of(2, 2, 3).begin == 2);
  CHECK(share_of(2, 2, 3).end == 2);
  CHECK(share_of(7, 0, 1).end == 7);
  CHECK_THROWS_AS(share_of(7, 1, 1), engine::Error);
  CHECK_THROWS_AS(share_of(-1, 0, 1), engine::Error);
}

TEST_CASE("rank_cuda_device: each rank of a machine takes the GPU of its local rank") {
  using engine::dist::rank_cuda_device;
  using engine::dist::World;
  // Two machines of two ranks each, two GPUs each: global rank 3 is local rank 1 -> GPU 1.
  World w;
  w.rank = 3;
  w.size = 4;
  w.local_rank = 1;
  w.local_size = 2;
  CHECK(rank_cuda_device(w, 2) == 1);
  CHECK(rank_cuda_device(w, 8) == 1);
  // Two ranks on a machine that shows one GPU: NCCL cannot put both on it; the error says so.
  try {
    (void)rank_cuda_device(w, 1);
    FAIL("two ranks on one GPU were accepted");
  } catch (const engine::Error& e) {
    CHECK(std::string(e.what()).find(
              "rank 3 is process 2 of 2 on its machine, which shows 1 CUDA") != std::string::npos);
  }
  // A world of one takes GPU 0.
  CHECK(rank_cuda_device(World{}, 1) == 0);
}

TEST_CASE("a process not started by mpirun is a world of one whose collectives copy") {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr) {
    WARN("skipped: this test runs outside mpirun");
    return;
  }
  const engine::dist::World& world = engine::dist::world();
  CHECK(world.rank == 0);
  CHECK(world.size == 1);
  CHECK(world.local_rank == 0);
  CHECK_FALSE(world.launched_by_mpi);
  float values[] = {1.5f, -2.0f};
  engine::dist::all_reduce_sum(values, 2);
  CHECK(values[0] == 1.5f);
  CHECK(values[1] == -2.0f);
  const std::vector<int64_t> gathered =
      engine::dist::all_gather_varying(std::vector<int64_t>{4, 5});
  CHECK(gathered == std::vector<int64_t>{4, 5});
  engine::dist::barrier();
}
