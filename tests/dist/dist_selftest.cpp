// The collectives of engine/dist/communicator.h between the ranks mpirun starts, run by
// tests/dist/mpi_collectives.sh. Modes:
//   collectives  every collective with values worked by hand; rank 0 prints "collectives ok"
//   rank-dies    rank 1 is killed (SIGKILL) while rank 0 waits in an all-reduce
//   rank-stalls  rank 1 sleeps while rank 0 waits in an all-reduce past DML_DIST_TIMEOUT_S
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "engine/dist/communicator.h"
#include "kernels/common/check.h"

namespace {

namespace dist = engine::dist;

void check_collectives() {
  const dist::World& w = dist::world();
  ENGINE_CHECK(w.launched_by_mpi && w.size >= 2, "run under mpirun -n 2 or more");
  // Rank r contributes r + 1: the sum is size (size + 1) / 2, exact in float and int64.
  const double expected = w.size * (w.size + 1) / 2.0;
  std::vector<float> floats(1000, static_cast<float>(w.rank + 1));
  dist::all_reduce_sum(floats.data(), floats.size());
  for (float v : floats) ENGINE_CHECK(v == expected, "all_reduce_sum(float): ", v);
  int64_t integer = w.rank + 1;
  dist::all_reduce_sum(&integer, 1);
  ENGINE_CHECK(integer == static_cast<int64_t>(expected), "all_reduce_sum(int64): ", integer);
  // all_gather: rank r sends {10 r, 10 r + 1}.
  const float pair[] = {10.0f * w.rank, 10.0f * w.rank + 1};
  const std::vector<float> pairs = dist::all_gather(pair, 2);
  for (int r = 0; r < w.size; ++r) {
    ENGINE_CHECK(pairs[2 * r] == 10.0f * r && pairs[2 * r + 1] == 10.0f * r + 1, "all_gather");
  }
  // all_gather_varying: rank r sends r + 1 copies of r -> 0, 1, 1, 2, 2, 2, ...
  const std::vector<int64_t> mine(static_cast<size_t>(w.rank + 1), w.rank);
  const std::vector<int64_t> all = dist::all_gather_varying(mine);
  size_t at = 0;
  for (int r = 0; r < w.size; ++r) {
    for (int k = 0; k <= r; ++k) ENGINE_CHECK(all.at(at++) == r, "all_gather_varying");
  }
  ENGINE_CHECK(at == all.size(), "all_gather_varying: ", all.size(), " values");
  // all_gather_varying of doubles (the bytes, exactly): rank r sends r / 3 and 1e300 + r
  // (not floats), rank 0 nothing when there are more than one.
  std::vector<double> thirds;
  if (w.rank > 0 || w.size == 1) thirds = {w.rank / 3.0, 1e300 + w.rank};
  const std::vector<double> all_thirds = dist::all_gather_varying(thirds);
  at = 0;
  for (int r = w.size == 1 ? 0 : 1; r < w.size; ++r) {
    ENGINE_CHECK(all_thirds.at(at++) == r / 3.0, "all_gather_varying(double)");
    ENGINE_CHECK(all_thirds.at(at++) == 1e300 + r, "all_gather_varying(double)");
  }
  ENGINE_CHECK(at == all_thirds.size(), "all_gather_varying(double): ", all_thirds.size());
  char word[8] = "none";
  if (w.rank == 0) std::strcpy(word, "root");
  dist::broadcast(word, sizeof word, 0);
  ENGINE_CHECK(std::strcmp(word, "root") == 0, "broadcast: ", word);
  dist::barrier();
  if (w.rank == 0) std::printf("collectives ok (%d ranks)\n", w.size);
}

void one_rank_fails(bool dies) {
  const dist::World& w = dist::world();
  dist::barrier();
  if (w.rank == 1) {
    if (dies) raise(SIGKILL);
    sleep(60);
  }
  float value = 1.0f;
  dist::all_reduce_sum(&value, 1);
  std::printf("rank %d: the all-reduce returned (it should not)\n", w.rank);
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  try {
    if (std::strcmp(mode, "collectives") == 0) {
      check_collectives();
    } else if (std::strcmp(mode, "rank-dies") == 0 || std::strcmp(mode, "rank-stalls") == 0) {
      one_rank_fails(std::strcmp(mode, "rank-dies") == 0);
    } else {
      std::fprintf(stderr, "usage: dist_selftest collectives|rank-dies|rank-stalls\n");
      return 2;
    }
  } catch (const engine::Error& e) {
    std::fprintf(stderr, "dist_selftest: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
