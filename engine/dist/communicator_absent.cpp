// engine/dist/communicator.h without MPI (the build found no MPI): every process is a world of
// one, and a process that mpirun started as one of several says so instead of repeating the work.
#include <cstdlib>
#include <cstring>

#include "engine/dist/communicator.h"
#include "engine/dist/launch_env.h"
#include "kernels/common/check.h"

namespace engine::dist {

const World& world() {
  static const World single = [] {
    const int launched_size = launcher_world_size();
    ENGINE_CHECK(launched_size <= 1, "started as one of ", launched_size,
                 " MPI ranks, but this program was built without MPI (install libopenmpi-dev "
                 "and rebuild; docs/distributed.md)");
    return World{};
  }();
  return single;
}

bool built_with_mpi() { return false; }

double collective_timeout_seconds() { return timeout_from_environment(); }

void all_reduce_sum(float*, size_t) {}
void all_reduce_sum(double*, size_t) {}
void all_reduce_sum(int64_t*, size_t) {}

int64_t start_all_reduce_sum(float*, size_t) { return 0; }
void wait_all_reduce_sum(int64_t) {}

std::vector<float> all_gather(const float* data, size_t count) {
  return std::vector<float>(data, data + count);
}
std::vector<int64_t> all_gather(const int64_t* data, size_t count) {
  return std::vector<int64_t>(data, data + count);
}
std::vector<float> all_gather_varying(const std::vector<float>& data) { return data; }
std::vector<double> all_gather_varying(const std::vector<double>& data) { return data; }
std::vector<int64_t> all_gather_varying(const std::vector<int64_t>& data) { return data; }
std::vector<char> all_gather_varying(const std::vector<char>& data) { return data; }

void broadcast(void*, size_t, int root) {
  ENGINE_CHECK(root == 0, "broadcast: root ", root, " in a world of one");
}

void barrier() {}

}  // namespace engine::dist
