// The emulator's mma.sync and cp.async (tests/support/cuda_emulator/include/mma_ptx.h) and wgmma
// (include/wgmma_ptx.h): a copy is
// not in shared memory until the thread waits for its group (before that the destination reads as
// NaN, the 0xFF poison), wait_group N leaves exactly the newest N groups in flight, src-size
// zero-fills, a misaligned copy fails the launch; an mma.sync operand that is not TF32, or a warp
// with lanes missing, fails the launch; wgmma's accumulators are NaN until wgmma.wait_group, it
// reads shared memory as of the last fence.proxy.async (NaN without one) and at the wait, and it
// fails the launch without a wgmma.fence or with a warpgroup's threads missing. The instructions'
// layouts and arithmetic are checked by the layout tests, tests/kernels/mma_sync_test.cpp and
// wgmma_test.cpp (kernels.emulated.mma.sync*, kernels.emulated.wgmma*), which also run on a GPU.
// Runs with emulator_test (label cpu).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <cuda_runtime.h>

#include "tests/emulator/mma_ptx_kernels.h"

namespace {

// Device memory of `count` floats (0xFF-filled, as the emulator's fresh memory), freed at scope
// exit, and read back as a vector.
struct DeviceFloats {
  float* ptr = nullptr;
  size_t count;
  explicit DeviceFloats(size_t count_) : count(count_) {
    void* memory = nullptr;
    REQUIRE(cudaMalloc(&memory, sizeof(float) * count) == cudaSuccess);
    ptr = static_cast<float*>(memory);
  }
  DeviceFloats(const std::vector<float>& values) : DeviceFloats(values.size()) {
    REQUIRE(cudaMemcpy(ptr, values.data(), sizeof(float) * count, cudaMemcpyHostToDevice) ==
            cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(ptr); }
  std::vector<float> read() const {
    std::vector<float> host(count);
    REQUIRE(cudaMemcpy(host.data(), ptr, sizeof(float) * count, cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    return host;
  }
};

std::vector<float> counting(size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = float(i + 1);
  return values;
}

}  // namespace

TEST_CASE("emulator: cp.async lands at the wait, read before it shared memory is NaN",
          "[emulator]") {
  const DeviceFloats src(counting(32));
  DeviceFloats before(32), after(32);
  REQUIRE(sample::cp_async_read_before_wait(src.ptr, before.ptr, after.ptr) == cudaSuccess);
  for (float value : before.read()) CHECK(std::isnan(value));
  CHECK(after.read() == counting(32));
}

TEST_CASE(
    "emulator: cp.async.wait_group N completes all but the newest N groups, src-size zero-fills",
    "[emulator]") {
  const DeviceFloats src(counting(12));
  DeviceFloats after_wait1(8), after_wait0(8), zero_filled(4);
  REQUIRE(sample::cp_async_groups(src.ptr, after_wait1.ptr, after_wait0.ptr, zero_filled.ptr) ==
          cudaSuccess);
  const std::vector<float> partial = after_wait1.read();
  for (int i = 0; i < 4; ++i) CHECK(partial[i] == float(i + 1));  // group 0: src[0..4)
  for (int i = 4; i < 8; ++i) CHECK(std::isnan(partial[i]));      // group 1: still in flight
  CHECK(after_wait0.read() == counting(8));
  CHECK(zero_filled.read() == std::vector<float>{9.0f, 10.0f, 0.0f, 0.0f});
}

TEST_CASE("emulator: a 16-byte cp.async needs 16-byte aligned addresses", "[emulator]") {
  const DeviceFloats src(counting(8));
  CHECK(sample::cp_async_aligned(src.ptr, 0) == cudaSuccess);
  CHECK(sample::cp_async_aligned(src.ptr, 1) == cudaErrorLaunchFailure);  // 4 bytes in
  emu::reset_errors();
  CHECK(sample::cp_async_aligned(src.ptr + 2, 0) == cudaErrorLaunchFailure);  // 8 bytes in
  emu::reset_errors();
}

TEST_CASE("emulator: mma.sync needs TF32 operands and the whole warp", "[emulator]") {
  DeviceFloats d(128);
  // 1.0f is TF32 (its low 13 bits are 0): every D element is 8 products of 1, so 8.
  REQUIRE(sample::mma_tf32_bits(0x3f800000u, 32, d.ptr) == cudaSuccess);
  CHECK(d.read() == std::vector<float>(128, 8.0f));
  // 1 + 2^-23 has its lowest bit set: not converted by cvt.rna.
  CHECK(sample::mma_tf32_bits(0x3f800001u, 32, d.ptr) == cudaErrorLaunchFailure);
  emu::reset_errors();
  CHECK(sample::mma_tf32_bits(0x3f800000u, 16, d.ptr) == cudaErrorLaunchFailure);  // half a warp
  emu::reset_errors();
}

TEST_CASE("emulator: wgmma accumulators land at wait_group, read before it they are NaN",
          "[emulator]") {
  DeviceFloats early(512), d(512);
  REQUIRE(sample::wgmma_ones(sample::WgmmaMistake::kNone, 128, early.ptr, d.ptr) == cudaSuccess);
  for (float value : early.read()) CHECK(std::isnan(value));
  CHECK(d.read() == std::vector<float>(512, 8.0f));  // 8 products of ones
}

TEST_CASE("emulator: wgmma reads shared memory through the async proxy, as of the wait",
          "[emulator]") {
  DeviceFloats early(512), d(512);
  // Without fence.proxy.async the ordinary stores are not visible to wgmma: it reads the 0xFF
  // bytes of fresh shared memory (NaN).
  REQUIRE(sample::wgmma_ones(sample::WgmmaMistake::kNoProxyFence, 128, early.ptr, d.ptr) ==
          cudaSuccess);
  for (float value : d.read()) CHECK(std::isnan(value));
  // A overwritten with twos (and fenced) between the issue and the wait: the instruction may read
  // its operands until it completes, and here it reads them at the wait.
  REQUIRE(sample::wgmma_ones(sample::WgmmaMistake::kOverwriteBeforeWait, 128, early.ptr, d.ptr) ==
          cudaSuccess);
  CHECK(d.read() == std::vector<float>(512, 16.0f));
}

TEST_CASE("emulator: a store into a stage that a wgmma in flight reads fails the launch",
          "[emulator]") {
  // A rewritten without a fence between the issue and the wait: the GPU's tensor core may read
  // either the ones or the twos (a pipeline that refills a stage too early); the emulator fails
  // the launch instead of picking one.
  DeviceFloats early(512), d(512);
  CHECK(sample::wgmma_ones(sample::WgmmaMistake::kStoreWhileInFlight, 128, early.ptr, d.ptr) ==
        cudaErrorLaunchFailure);
  emu::reset_errors();
}

TEST_CASE("emulator: wgmma needs a wgmma.fence and the whole warpgroup", "[emulator]") {
  DeviceFloats early(512), d(512);
  CHECK(sample::wgmma_ones(sample::WgmmaMistake::kNoWgmmaFence, 128, early.ptr, d.ptr) ==
        cudaErrorLaunchFailure);
  emu::reset_errors();
  CHECK(sample::wgmma_ones(sample::WgmmaMistake::kNone, 96, early.ptr, d.ptr) ==
        cudaErrorLaunchFailure);  // three warps
  emu::reset_errors();
}
