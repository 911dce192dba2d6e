// engine/dist/communicator.h over MPI (the build found MPI; docs/distributed.md).
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include "engine/dist/communicator.h"
#include "engine/dist/launch_env.h"
#include "kernels/common/check.h"

namespace engine::dist {

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Ends the process when one collective has waited longer than the timeout: a rank that died
// or stalled would otherwise keep the others in MPI forever. It exits rather than calling MPI
// (MPI is busy in the waiting thread); mpirun then ends the other ranks.
class Watchdog {
 public:
  void start(int rank, int size, double timeout_seconds) {
    rank_ = rank;
    size_ = size;
    timeout_seconds_ = timeout_seconds;
    std::thread([this] { watch(); }).detach();
  }
  void enter(const char* collective) {
    collective_.store(collective);
    deadline_ms_.store(now_ms() + static_cast<int64_t>(timeout_seconds_ * 1000.0));
  }
  void leave() { deadline_ms_.store(0); }

 private:
  void watch() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const int64_t deadline = deadline_ms_.load();
      if (deadline == 0 || now_ms() < deadline) continue;
      std::fprintf(stderr,
                   "dml: error: rank %d of %d waited more than %g s in MPI %s: another rank "
                   "died or stalled; ending the job (DML_DIST_TIMEOUT_S sets the limit)\n",
                   rank_, size_, timeout_seconds_, collective_.load());
      std::fflush(stderr);
      std::_Exit(1);
    }
  }
  int rank_ = 0;
  int size_ = 1;
  double timeout_seconds_ = 600.0;
  std::atomic<int64_t> deadline_ms_{0};
  std::atomic<const char*> collective_{""};
};

Watchdog& watchdog() {
  static Watchdog* instance = new Watchdog();  // never destroyed: its thread may outlive main
  return *instance;
}

void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  engine::fail("MPI ", what, " failed: ", std::string(text, static_cast<size_t>(length)));
}

// MPI_Finalize at the end of the program, when this program initialized MPI.
struct Finalizer {
  ~Finalizer() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
};

// The communicator of the non-blocking sums (a duplicate of the world's, made when the world
// starts, as MPI_Comm_dup is a collective), and their requests by id.
struct SumsInFlight {
  MPI_Comm comm = MPI_COMM_NULL;
  int64_t next_id = 1;
  std::map<int64_t, MPI_Request> requests;
};

SumsInFlight& sums_in_flight() {
  static SumsInFlight sums;
  return sums;
}

World start_world() {
  World w;
  if (launcher_world_size() == 0) return w;  // not started by mpirun: never initialize MPI
  const double timeout = timeout_from_environment();
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init");
  static Finalizer finalizer;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &w.rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &w.size), "MPI_Comm_size");
  MPI_Comm local;
  check_mpi(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &local),
      "MPI_Comm_split_type");
  check_mpi(MPI_Comm_rank(local, &w.local_rank), "MPI_Comm_rank (local)");
  check_mpi(MPI_Comm_size(local, &w.local_size), "MPI_Comm_size (local)");
  MPI_Comm_free(&local);
  w.launched_by_mpi = true;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &sums_in_flight().comm), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(sums_in_flight().comm, MPI_ERRORS_RETURN);
  if (w.size > 1) watchdog().start(w.rank, w.size, timeout);
  return w;
}

// Runs one collective under the watchdog.
template <typename Call>
void guarded(const char* name, Call call) {
  if (world().size == 1) return;
  watchdog().enter(name);
  const int code = call();
  watchdog().leave();
  check_mpi(code, name);
}

int as_count(size_t count, const char* what) {
  ENGINE_CHECK(count <= static_cast<size_t>(INT32_MAX), what, ": ", count,
               " elements are more than one MPI call carries");
  return static_cast<int>(count);
}

template <typename T>
std::vector<T> gather_fixed(const T* data, size_t count, MPI_Datatype type) {
  const World& w = world();
  std::vector<T> out(count * static_cast<size_t>(w.size));
  if (w.size == 1) {
    std::copy(data, data + count, out.begin());
    return out;
  }
  const int n = as_count(count, "all_gather");
  guarded("MPI_Allgather",
          [&] { return MPI_Allgather(data, n, type, out.data(), n, type, MPI_COMM_WORLD); });
  return out;
}

template <typename T>
std::vector<T> gather_varying(const std::vector<T>& data, MPI_Datatype type) {
  const World& w = world();
  if (w.size == 1) return data;
  const int64_t mine = static_cast<int64_t>(data.size());
  const std::vector<int64_t> counts = all_gather(&mine, 1);
  std::vector<int> sizes(counts.size()), offsets(counts.size());
  size_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    sizes[r] = as_count(static_cast<size_t>(counts[r]), "all_gather_varying");
    offsets[r] = as_count(total, "all_gather_varying");
    total += static_cast<size_t>(counts[r]);
  }
  std::vector<T> out(total);
  guarded("MPI_Allgatherv", [&] {
    return MPI_Allgatherv(data.data(), sizes[static_cast<size_t>(w.rank)], type, out.data(),
                          sizes.data(), offsets.data(), type, MPI_COMM_WORLD);
  });
  return out;
}

void reduce_in_place(void* data, size_t count, MPI_Datatype type) {
  const int n = as_count(count, "all_reduce_sum");
  guarded("MPI_Allreduce",
          [&] { return MPI_Allreduce(MPI_IN_PLACE, data, n, type, MPI_SUM, MPI_COMM_WORLD); });
}

}  // namespace

int64_t start_all_reduce_sum(float* data, size_t count) {
  if (world().size == 1) return 0;
  SumsInFlight& sums = sums_in_flight();
  const int n = as_count(count, "start_all_reduce_sum");
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, sums.comm, &request),
            "MPI_Iallreduce");
  // Open MPI moves a non-blocking collective on only inside MPI calls: let the earlier ones on.
  for (auto& [id, earlier] : sums.requests) {
    int done = 0;
    check_mpi(MPI_Test(&earlier, &done, MPI_STATUS_IGNORE), "MPI_Test");
  }
  const int64_t id = sums.next_id++;
  sums.requests.emplace(id, request);
  return id;
}

void wait_all_reduce_sum(int64_t id) {
  if (id == 0) return;
  SumsInFlight& sums = sums_in_flight();
  auto it = sums.requests.find(id);
  ENGINE_CHECK(it != sums.requests.end(), "wait_all_reduce_sum: no sum in flight with id ", id);
  MPI_Request request = it->second;
  sums.requests.erase(it);
  guarded("MPI_Wait (MPI_Iallreduce)", [&] { return MPI_Wait(&request, MPI_STATUS_IGNORE); });
}

const World& world() {
  static const World w = start_world();
  return w;
}

bool built_with_mpi() { return true; }

double collective_timeout_seconds() { return timeout_from_environment(); }

void all_reduce_sum(float* data, size_t count) { reduce_in_place(data, count, MPI_FLOAT); }
void all_reduce_sum(double* data, size_t count) { reduce_in_place(data, count, MPI_DOUBLE); }
void all_reduce_sum(int64_t* data, size_t count) { reduce_in_place(data, count, MPI_INT64_T); }

std::vector<float> all_gather(const float* data, size_t count) {
  return gather_fixed(data, count, MPI_FLOAT);
}
std::vector<int64_t> all_gather(const int64_t* data, size_t count) {
  return gather_fixed(data, count, MPI_INT64_T);
}
std::vector<float> all_gather_varying(const std::vector<float>& data) {
  return gather_varying(data, MPI_FLOAT);
}
std::vector<double> all_gather_varying(const std::vector<double>& data) {
  return gather_varying(data, MPI_DOUBLE);
}
std::vector<int64_t> all_gather_varying(const std::vector<int64_t>& data) {
  return gather_varying(data, MPI_INT64_T);
}
std::vector<char> all_gather_varying(const std::vector<char>& data) {
  return gather_varying(data, MPI_CHAR);
}

void broadcast(void* data, size_t bytes, int root) {
  ENGINE_CHECK(root >= 0 && root < world().size, "broadcast: root ", root, " of ", world().size);
  const int n = as_count(bytes, "broadcast");
  guarded("MPI_Bcast", [&] { return MPI_Bcast(data, n, MPI_BYTE, root, MPI_COMM_WORLD); });
}

void barrier() {
  guarded("MPI_Barrier", [&] { return MPI_Barrier(MPI_COMM_WORLD); });
}

}  // namespace engine::dist
