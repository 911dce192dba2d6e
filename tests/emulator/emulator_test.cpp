// The CUDA emulator (tests/support/cuda_emulator) checked on its own: barriers, warp operations,
// poisoned memory, and the errors a GPU would raise. These always run (label cpu): the emulator
// lets the [cuda] tests run on machines without a GPU (`<area>.emulated.*`), so it must be right.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/common/cuda_workspace.cuh"
#include "kernels/retrieval/retrieval.h"
#include "tests/emulator/sample_kernels.h"
#include "tests/support/cuda_emulator/launch_resources.h"

namespace {

template <typename T>
T* device_copy(const std::vector<T>& host) {
  void* ptr = nullptr;
  REQUIRE(cudaMalloc(&ptr, sizeof(T) * host.size()) == cudaSuccess);
  REQUIRE(cudaMemcpy(ptr, host.data(), sizeof(T) * host.size(), cudaMemcpyHostToDevice) ==
          cudaSuccess);
  return static_cast<T*>(ptr);
}

template <typename T>
T* device_array(size_t count) {
  void* ptr = nullptr;
  REQUIRE(cudaMalloc(&ptr, sizeof(T) * count) == cudaSuccess);
  return static_cast<T*>(ptr);
}

template <typename T>
std::vector<T> host_copy(const T* device, size_t count) {
  std::vector<T> host(count);
  REQUIRE(cudaMemcpy(host.data(), device, sizeof(T) * count, cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  return host;
}

// The launch-resource table exists only in a build with nvcc
// (tests/support/cuda_emulator/launch_resources.h).
bool have_kernel_resources() {
  if (!emu::kernel_resources().empty()) return true;
  WARN("skipped: built without nvcc, so no kernel resources to check");
  return false;
}

// The rows of the table for `kernel`, one per architecture.
std::vector<emu::KernelResources> resources_of(const std::string& kernel) {
  std::vector<emu::KernelResources> rows;
  for (const emu::KernelResources& r : emu::kernel_resources())
    if (r.kernel == kernel) rows.push_back(r);
  return rows;
}

// Every test starts from a clean context, as each CTest case runs in its own process anyway.
struct CleanContext {
  CleanContext() { emu::reset_errors(); }
  ~CleanContext() { emu::reset_errors(); }
};

}  // namespace

TEST_CASE("emulator: __syncthreads makes a shared-memory tree sum exact", "[emulator]") {
  CleanContext context;
  // 600 ones and twos over 3 blocks of 256: block sums by hand.
  std::vector<float> x(600);
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 2 == 0 ? 1.0f : 2.0f;
  float* dx = device_copy(x);
  float* sums = device_array<float>(3);
  REQUIRE(sample::block_sums(dx, 600, sums) == cudaSuccess);
  // Block 0 and 1: 128 ones + 128 twos = 384; block 2 holds 88 values: 44 + 88 = 132.
  CHECK(host_copy(sums, 3) == std::vector<float>{384.0f, 384.0f, 132.0f});
  cudaFree(dx);
  cudaFree(sums);
}

TEST_CASE("emulator: warp shuffles, scan and ballot by hand", "[emulator]") {
  CleanContext context;
  std::vector<int> x(32);
  for (int lane = 0; lane < 32; ++lane) x[lane] = (lane * 7) % 32;  // a permutation of 0..31
  int* dx = device_copy(x);
  int* sum = device_array<int>(1);
  int* max = device_array<int>(32);
  int* scan = device_array<int>(32);
  unsigned* odd = device_array<unsigned>(1);
  REQUIRE(sample::warp_ops(dx, sum, max, scan, odd) == cudaSuccess);
  CHECK(host_copy(sum, 1)[0] == 31 * 32 / 2);
  CHECK(host_copy(max, 32) == std::vector<int>(32, 31));
  std::vector<int> expected_scan(32);
  int running = 0;
  for (int lane = 0; lane < 32; ++lane) expected_scan[lane] = running += x[lane];
  CHECK(host_copy(scan, 32) == expected_scan);
  unsigned expected_odd = 0;
  for (int lane = 0; lane < 32; ++lane) expected_odd |= (x[lane] % 2 != 0 ? 1u : 0u) << lane;
  CHECK(host_copy(odd, 1)[0] == expected_odd);
  for (void* p : {static_cast<void*>(dx), static_cast<void*>(sum), static_cast<void*>(max),
                  static_cast<void*>(scan), static_cast<void*>(odd)}) {
    cudaFree(p);
  }
}

TEST_CASE("emulator: unwritten shared and device memory read as 0xFF bytes", "[emulator]") {
  CleanContext context;
  unsigned* out = device_array<unsigned>(6);
  REQUIRE(sample::read_unwritten_shared(out) == cudaSuccess);
  CHECK(host_copy(out, 6) == std::vector<unsigned>(6, 0xFFFFFFFFu));
  float* fresh = device_array<float>(3);
  for (float v : host_copy(fresh, 3)) CHECK(std::isnan(v));
  cudaFree(out);
  cudaFree(fresh);
}

TEST_CASE("emulator: bad launch configurations fail like on a GPU", "[emulator]") {
  CleanContext context;
  int* out = device_array<int>(64);
  CHECK(sample::fill(out, 64, 7, 0, 32) == cudaErrorInvalidConfiguration);    // no blocks
  CHECK(sample::fill(out, 64, 7, 1, 2048) == cudaErrorInvalidConfiguration);  // > 1024 threads
  CHECK(cudaGetLastError() == cudaSuccess);                // not sticky: the next launch works
  REQUIRE(sample::fill(out, 64, 7, 3, 5) == cudaSuccess);  // grid-stride with odd sizes
  CHECK(host_copy(out, 64) == std::vector<int>(64, 7));
  cudaFree(out);
}

TEST_CASE("emulator: dynamic shared memory (extern __shared__) holds the launch's bytes",
          "[emulator]") {
  CleanContext context;
  std::vector<float> x(200);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) + 0.5f;
  float* x_device = device_copy(x);
  float* y_device = device_array<float>(200);
  REQUIRE(sample::reverse_through_dynamic_shared(x_device, y_device, 200, 200 * sizeof(float), 0) ==
          cudaSuccess);
  const std::vector<float> y = host_copy(y_device, 200);
  for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == x[199 - i]);
  // Each block finds fresh 0xFF bytes, not the 7s the block before it wrote.
  unsigned* out = device_array<unsigned>(8);
  REQUIRE(sample::read_dynamic_shared(out, 2) == cudaSuccess);
  CHECK(host_copy(out, 8) == std::vector<unsigned>(8, 0xFFFFFFFFu));
  cudaFree(out);
  cudaFree(x_device);
  cudaFree(y_device);
}

TEST_CASE("emulator: past 48 KiB of dynamic shared memory only with the kernel's opt-in",
          "[emulator]") {
  CleanContext context;
  float* x = device_array<float>(64);
  float* y = device_array<float>(64);
  const std::size_t kib64 = 64 * 1024;
  // Without cudaFuncSetAttribute a launch asking for more than 48 KiB is refused.
  CHECK(sample::reverse_through_dynamic_shared(x, y, 64, kib64, 0) == cudaErrorInvalidValue);
  CHECK(sample::reverse_through_dynamic_shared(x, y, 64, 48 * 1024, 0) == cudaSuccess);
  // An opt-in past what a block can have (227 KiB on sm_90) is refused; 64 KiB is granted, and a
  // launch past the granted limit is refused again.
  CHECK(sample::reverse_through_dynamic_shared(x, y, 64, kib64, 232448 + 1) ==
        cudaErrorInvalidValue);
  CHECK(sample::reverse_through_dynamic_shared(x, y, 64, kib64, int(kib64)) == cudaSuccess);
  CHECK(sample::reverse_through_dynamic_shared(x, y, 64, kib64 + 16, 0) == cudaErrorInvalidValue);
  cudaDeviceProp properties;
  REQUIRE(cudaGetDeviceProperties(&properties, 0) == cudaSuccess);
  CHECK(properties.sharedMemPerBlockOptin == 232448);
  // The per-architecture limits the launch-resource check applies with the opt-in.
  CHECK(emu::max_opt_in_shared_bytes(80) == 166912);
  CHECK(emu::max_opt_in_shared_bytes(90) == 232448);
  cudaFree(x);
  cudaFree(y);
}

TEST_CASE("emulator: registers per block follow the GPU's allocation rule", "[emulator]") {
  // A warp takes 32 r registers rounded up to a multiple of 256; a block takes that per warp.
  CHECK(emu::registers_per_block(64, 1024) == 65536);  // 2048 per warp x 32 warps: fits
  CHECK(emu::registers_per_block(65, 1024) == 73728);  // 2080 -> 2304 per warp: does not
  CHECK(emu::registers_per_block(128, 512) == 65536);  // 4096 x 16
  CHECK(emu::registers_per_block(128, 513) == 69632);  // a 17th warp, though one thread
  CHECK(emu::registers_per_block(255, 256) == 65536);  // 8160 -> 8192 per warp x 8
  CHECK(emu::registers_per_block(10, 1) == 512);       // 320 -> 512 for the one warp
}

TEST_CASE("emulator: a block too big for its kernel's registers fails like on a GPU",
          "[emulator]") {
  if (!have_kernel_resources()) return;
  CleanContext context;
  const std::vector<emu::KernelResources> rows = resources_of("register_hungry_kernel");
  REQUIRE(!rows.empty());
  for (const emu::KernelResources& r : rows) {
    INFO("sm_" << r.sm);
    CHECK(r.registers > 128);  // 256 threads fit (8 warps x 32 r <= 65,536), 512 do not
  }
  const unsigned wide = 512, narrow = 256;
  std::vector<float> x(80 * narrow);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % narrow) / 64.0f + float(i / narrow);
  float* x_device = device_copy(std::vector<float>(80 * wide, 1.0f));
  float* y_device = device_array<float>(80 * wide);
  CHECK(sample::register_hungry(x_device, y_device, wide) == cudaErrorLaunchOutOfResources);
  CHECK(cudaGetLastError() == cudaSuccess);  // not sticky: a smaller block runs
  REQUIRE(cudaMemcpy(x_device, x.data(), sizeof(float) * x.size(), cudaMemcpyHostToDevice) ==
          cudaSuccess);
  REQUIRE(sample::register_hungry(x_device, y_device, narrow) == cudaSuccess);
  const std::vector<float> y = host_copy(y_device, 80 * narrow);
  for (unsigned t : {0u, 1u, 255u}) {
    float total = 0.0f;
    for (unsigned i = 0; i < 80; ++i) total += x[i * narrow + t];
    for (unsigned i : {0u, 79u}) CHECK(y[i * narrow + t] == x[i * narrow + t] * total);
  }
  // The message says what a GPU would: which architecture, how many registers.
  const std::string why = emu::launch_resource_problem("register_hungry_kernel", wide, 0, false);
  CHECK_THAT(why, Catch::Contains("too many resources requested for launch on sm_"));
  CHECK(emu::launch_resource_problem("register_hungry_kernel", narrow, 0, false).empty());
  CHECK(emu::launch_resource_problem("a_kernel_nobody_compiled", 1024, 0, false).empty());
  cudaFree(x_device);
  cudaFree(y_device);
}

TEST_CASE("emulator: a block larger than the kernel's __launch_bounds__ fails like on a GPU",
          "[emulator]") {
  if (!have_kernel_resources()) return;
  CleanContext context;
  const std::pair<const char*, int> declared[] = {
      {"bounded_fill_kernel", 64}, {"register_hungry_kernel", 0}, {"conv2d_fprop_kernel", 256}};
  for (const auto& [kernel, bound] : declared) {
    const std::vector<emu::KernelResources> rows = resources_of(kernel);
    REQUIRE(!rows.empty());
    for (const emu::KernelResources& r : rows) {
      INFO(kernel << " on sm_" << r.sm);
      CHECK(r.max_threads == bound);  // 0: declares no bound
    }
  }
  int* out = device_array<int>(128);
  CHECK(sample::bounded_fill(out, 3, 128) == cudaErrorLaunchOutOfResources);
  CHECK_THAT(emu::launch_resource_problem("bounded_fill_kernel", 65, 0, false),
             Catch::Contains("more than the kernel's __launch_bounds__ of 64"));
  REQUIRE(sample::bounded_fill(out, 3, 64) == cudaSuccess);
  CHECK(host_copy(out, 64) == std::vector<int>(64, 3));
  cudaFree(out);
}

TEST_CASE("emulator: ptxas resources are known for every kernel of kernels/*.cu", "[emulator]") {
  if (!have_kernel_resources()) return;
  std::set<int> architectures;
  std::set<std::pair<std::string, int>> known;
  for (const emu::KernelResources& r : emu::kernel_resources()) {
    architectures.insert(r.sm);
    known.insert({r.kernel, r.sm});
  }
  const std::regex global_re(
      R"(__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\()");
  std::set<std::string> kernels;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(std::string(ENGINE_SOURCE_DIR) + "/kernels")) {
    if (entry.path().extension() != ".cu" ||
        entry.path().string().find("_cudnn") != std::string::npos)
      continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string source = text.str();
    for (std::sregex_iterator it(source.begin(), source.end(), global_re), end; it != end; ++it)
      kernels.insert((*it)[1]);
  }
  REQUIRE(kernels.size() > 50);  // the regex found the kernels (65 when this test was written)
  for (const std::string& kernel : kernels) {
    for (int sm : architectures) {
      INFO(kernel << " on sm_" << sm);
      CHECK(known.count({kernel, sm}) == 1);
    }
  }
}

TEST_CASE("emulator: host pointers and out-of-range copies are refused", "[emulator]") {
  CleanContext context;
  std::vector<int> host(8, 0);
  CHECK(sample::fill(host.data(), 8, 1, 1, 8) == cudaErrorInvalidDevicePointer);
  CHECK(host == std::vector<int>(8, 0));  // the kernel did not run
  int* out = device_array<int>(8);
  std::vector<int> nine(9, 0);
  CHECK(cudaMemcpy(nine.data(), out, sizeof(int) * 9, cudaMemcpyDeviceToHost) ==
        cudaErrorInvalidValue);
  CHECK(cudaMemcpy(nine.data(), out + 1, sizeof(int) * 7, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(cudaFree(host.data()) == cudaErrorInvalidDevicePointer);
  // Overlapping areas: undefined on a GPU ("may not overlap"), so refused; touching ones are fine.
  CHECK(cudaMemcpy(out + 1, out, sizeof(int) * 4, cudaMemcpyDeviceToDevice) ==
        cudaErrorInvalidValue);
  CHECK(cudaMemcpy(out, out + 3, sizeof(int) * 4, cudaMemcpyDeviceToDevice) ==
        cudaErrorInvalidValue);
  CHECK(cudaMemcpy(out + 4, out, sizeof(int) * 4, cudaMemcpyDeviceToDevice) == cudaSuccess);
  cudaGetLastError();
  cudaFree(out);
}

// (No "[begin, end)" in the name: an unbalanced bracket makes CMake's list of the discovered
// tests swallow the names after it into this one.)
TEST_CASE("emulator: DeviceRadixSort::SortKeys orders by the bits from begin to end, stably",
          "[emulator]") {
  // CUB's contract, by hand: only bits [1, 4) take part (key >> 1 & 7), keys equal there keep
  // their input order; a call without temporary storage only reports its size.
  CleanContext context;
  const std::vector<uint32_t> keys = {0x13, 0x0E, 0x22, 0x05, 0x04, 0x10};
  //                        digits:      1     7     1     2     2     0
  const std::vector<uint32_t> expected = {0x10, 0x13, 0x22, 0x05, 0x04, 0x0E};
  uint32_t* in = device_array<uint32_t>(6);
  uint32_t* out = device_array<uint32_t>(6);
  REQUIRE(cudaMemcpy(in, keys.data(), sizeof(uint32_t) * 6, cudaMemcpyHostToDevice) == cudaSuccess);
  std::size_t bytes = 0;
  REQUIRE(cub::DeviceRadixSort::SortKeys(nullptr, bytes, in, out, 6, 1, 4) == cudaSuccess);
  REQUIRE(bytes > 0);
  void* storage = nullptr;
  REQUIRE(cudaMalloc(&storage, bytes) == cudaSuccess);
  REQUIRE(cub::DeviceRadixSort::SortKeys(storage, bytes, in, out, 6, 1, 4) == cudaSuccess);
  std::vector<uint32_t> sorted(6);
  REQUIRE(cudaMemcpy(sorted.data(), out, sizeof(uint32_t) * 6, cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  CHECK(sorted == expected);
  // All 32 bits: plain ascending order.
  REQUIRE(cub::DeviceRadixSort::SortKeys(storage, bytes, in, out, 6) == cudaSuccess);
  REQUIRE(cudaMemcpy(sorted.data(), out, sizeof(uint32_t) * 6, cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  CHECK(sorted == std::vector<uint32_t>{0x04, 0x05, 0x0E, 0x10, 0x13, 0x22});
  cudaFree(storage);
  cudaFree(in);
  cudaFree(out);
}

TEST_CASE("emulator: a barrier deadlock and a trap are sticky launch failures", "[emulator]") {
  CleanContext context;
  int* out = device_array<int>(8);
  CHECK(sample::deadlock(out) == cudaErrorLaunchFailure);
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);  // sticky, as a broken context
  emu::reset_errors();
  CHECK(sample::trap(out) == cudaErrorLaunchFailure);
  void* more = nullptr;
  CHECK(cudaMalloc(&more, 4) == cudaErrorLaunchFailure);
  emu::reset_errors();
  cudaFree(out);
}

// Lowers the emulated device's memory for one test
// (tests/support/cuda_emulator/include/cuda_runtime.h).
struct DeviceMemoryLimit {
  explicit DeviceMemoryLimit(size_t bytes) { emu::set_device_memory_bytes(bytes); }
  ~DeviceMemoryLimit() { emu::set_device_memory_bytes(0); }
};

TEST_CASE("emulator: a host function's workspace is freed on every way out",
          "[emulator][workspace]") {
  CleanContext context;
  using engine::kernels::StreamWorkspace;
  const size_t before = emu::allocated_device_bytes();
  {
    StreamWorkspace workspace(1000, nullptr, "test");
    CHECK(emu::allocated_device_bytes() == before + 1000);
    workspace.release("test free");
    CHECK(emu::allocated_device_bytes() == before);
    workspace.release("test free");  // a second release frees nothing twice
  }
  try {
    StreamWorkspace workspace(1000, nullptr, "test");
    REQUIRE(emu::allocated_device_bytes() == before + 1000);
    engine::fail("a check fails between the allocation and the release");
  } catch (const engine::Error&) {
  }
  CHECK(emu::allocated_device_bytes() == before);
  {
    StreamWorkspace empty(0, nullptr, "test");  // nothing to allocate or free
    CHECK(empty.bytes() == nullptr);
    CHECK(emu::allocated_device_bytes() == before);
  }
  DeviceMemoryLimit limit(before + 512);
  CHECK_THROWS_WITH(StreamWorkspace(1000, nullptr, "sum_axis_cuda"),
                    Catch::Contains("CUDA error in sum_axis_cuda: workspace of 1000 bytes") &&
                        Catch::Contains("MiB free of") && Catch::Contains("out of memory"));
  CHECK(cudaGetLastError() == cudaSuccess);  // the failed allocation left no error behind
  CHECK(emu::allocated_device_bytes() == before);
  const auto checked_allocation = [] {
    void* memory = nullptr;
    CUDA_CHECK(cudaMalloc(&memory, 1000), "a checked call");
  };
  CHECK_THROWS_WITH(checked_allocation(),
                    Catch::Contains("CUDA error in a checked call: out of memory"));
  CHECK(cudaGetLastError() == cudaSuccess);  // nor did a failed call under CUDA_CHECK
}

// rank_query_block_cuda takes two workspaces: its slot offsets, then (sized from them) the sort's.
// When the second does not fit, the first must not stay allocated.
TEST_CASE("emulator: rank_query_block_cuda out of memory mid-way leaks nothing",
          "[emulator][workspace]") {
  CleanContext context;
  const int64_t n = 6, rows = 2;
  float* keys = device_copy(std::vector<float>{0, 1, 2, 3, 4, 5, 5, 0, 1, 2, 3, 4});
  int64_t* class_of = device_copy(std::vector<int64_t>{0, 0, 0, 1, 1, 1});
  int64_t* offsets = device_copy(std::vector<int64_t>{0, 3, 6});
  int64_t* members = device_copy(std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  auto* out = device_array<engine::kernels::QueryRanking>(rows);
  const engine::kernels::ClassLayout classes{class_of, offsets, members, 2};

  const size_t before = emu::allocated_device_bytes();
  {
    // Room for the 24 bytes of slot offsets (rows + 1 of int64), not for the 120-plus of the rest.
    DeviceMemoryLimit limit(before + 64);
    CHECK_THROWS_WITH(engine::kernels::rank_query_block_cuda(keys, n, 0, rows, classes, out),
                      Catch::Contains("rank_query_block_cuda (6 slots for 2 rows)") &&
                          Catch::Contains("out of memory"));
    CHECK(emu::allocated_device_bytes() == before);
  }
  // With the memory back, the same call works (query 0: its class mates 1, 2 rank first).
  engine::kernels::rank_query_block_cuda(keys, n, 0, rows, classes, out);
  CHECK(emu::allocated_device_bytes() == before);
  const auto ranking = host_copy(out, rows);
  CHECK(ranking[0].first_position == 1);
  CHECK(ranking[0].average_precision == 1.0);
  for (void* p : std::vector<void*>{keys, class_of, offsets, members, out}) cudaFree(p);
}

// The race checker's subjects (tests/support/cuda_emulator/racecheck.h). On the plain emulator, in
// either order, the racy block_total computes the right answer too, which is the point: only the
// race checker sees that race. (The racy shift_right, below, is also caught by
// DML_CUDA_EMULATOR_ORDER=reverse, which makes it read unwritten shared memory.)
TEST_CASE("emulator: a racy and a race-free kernel alike compute the right answer here",
          "[emulator]") {
  CleanContext context;
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);  // small integers
  float* dx = device_copy(x);
  float* total = device_copy(std::vector<float>{0.0f});
  REQUIRE(sample::block_total(dx, 1000, total, true) == cudaSuccess);
  REQUIRE(sample::block_total(dx, 1000, total, false) == cudaSuccess);
  // 1000 = 142 * 7 + 6: 142 * 21 + (0 + 1 + ... + 5) = 2997, summed twice.
  CHECK(host_copy(total, 1) == std::vector<float>{2.0f * 2997.0f});
  float* shifted = device_array<float>(256);
  REQUIRE(sample::shift_right(dx, shifted, true) == cudaSuccess);
  const std::vector<float> y = host_copy(shifted, 256);
  CHECK(y[0] == 0.0f);
  for (size_t t = 1; t < 256; ++t) CHECK(y[t] == x[t - 1]);
  cudaFree(dx);
  cudaFree(total);
  cudaFree(shifted);
}

// Hidden ([.racecheck]): run by CTest only in a race-checker build, where each must make
// ThreadSanitizer report a data race in the named kernel (tests/CMakeLists.txt).
TEST_CASE("racecheck: blocks adding into one word without an atomic", "[.racecheck]") {
  CleanContext context;
  float* dx = device_copy(std::vector<float>(600, 1.0f));
  float* total = device_copy(std::vector<float>{0.0f});
  REQUIRE(sample::block_total(dx, 600, total, false) == cudaSuccess);
  CHECK(host_copy(total, 1) == std::vector<float>{600.0f});  // right, and racy all the same
  cudaFree(dx);
  cudaFree(total);
}

TEST_CASE("racecheck: a shared-memory read without __syncthreads", "[.racecheck]") {
  CleanContext context;
  float* dx = device_copy(std::vector<float>(256, 1.0f));
  float* y = device_array<float>(256);
  REQUIRE(sample::shift_right(dx, y, false) == cudaSuccess);
  cudaFree(dx);
  cudaFree(y);
}
