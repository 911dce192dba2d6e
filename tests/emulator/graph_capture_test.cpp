// The CUDA emulator's stream capture and graphs (tests/support/cuda_emulator/graph.cpp): what a
// capture records, what a replay runs, and the calls a capture refuses as CUDA does. Expected
// values are worked by hand from the sample kernel add_on_stream (x[i] += value).
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "tests/emulator/sample_kernels.h"

namespace {

constexpr int kCount = 100;  // more than the 64 threads of add_on_stream: the stride loop runs

struct CleanContext {
  CleanContext() { emu::reset_errors(); }
  ~CleanContext() { emu::reset_errors(); }
};

float* device_floats(const std::vector<float>& host) {
  void* ptr = nullptr;
  REQUIRE(cudaMalloc(&ptr, sizeof(float) * host.size()) == cudaSuccess);
  REQUIRE(cudaMemcpy(ptr, host.data(), sizeof(float) * host.size(), cudaMemcpyHostToDevice) ==
          cudaSuccess);
  return static_cast<float*>(ptr);
}

std::vector<float> host_floats(const float* device, int count) {
  std::vector<float> host(static_cast<std::size_t>(count));
  REQUIRE(cudaMemcpy(host.data(), device, sizeof(float) * host.size(), cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  return host;
}

std::vector<float> ramp() {
  std::vector<float> x(kCount);
  for (int i = 0; i < kCount; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(i);
  return x;
}

cudaStream_t new_stream() {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  return stream;
}

// Begins a capture, runs `refused` (which must fail with `error`), and checks that the capture
// became invalid: cudaStreamEndCapture answers cudaErrorStreamCaptureInvalidated and no graph.
template <typename Call>
void check_refused(cudaStreamCaptureMode mode, cudaError_t error, Call refused) {
  cudaStream_t stream = new_stream();
  REQUIRE(cudaStreamBeginCapture(stream, mode) == cudaSuccess);
  CHECK(refused(stream) == error);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing(stream, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusInvalidated);
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(&status);  // must be overwritten with null
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
  CHECK(graph == nullptr);
  (void)cudaGetLastError();
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

}  // namespace

TEST_CASE("emulator graph: a capture records launches and copies, a replay runs them in order",
          "[emulator]") {
  CleanContext context;
  float* x = device_floats(ramp());
  float* y = device_floats(std::vector<float>(kCount, -5.0f));
  cudaStream_t stream = new_stream();
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing(stream, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  REQUIRE(sample::add_on_stream(x, kCount, 1.0f, stream) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(y, x, sizeof(float) * kCount, cudaMemcpyDeviceToDevice, stream) ==
          cudaSuccess);
  REQUIRE(sample::add_on_stream(x, kCount, 2.0f, stream) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(x + kCount - 1, 0, sizeof(float), stream) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);
  // Recorded, not run: x and y are as they were.
  CHECK(host_floats(x, kCount) == ramp());
  CHECK(host_floats(y, kCount) == std::vector<float>(kCount, -5.0f));

  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, nullptr) == cudaSuccess);  // any stream may replay it
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  // Per replay: x += 1, y = x, x += 2, x[99] = 0. Two replays from x[i] = i:
  // y = (i + 3) + 1 = i + 4, x = i + 6, and x[99] = 0, y[99] = 0 + 1 = 1.
  const std::vector<float> got_x = host_floats(x, kCount), got_y = host_floats(y, kCount);
  for (int i = 0; i < kCount - 1; ++i) {
    CHECK(got_x[static_cast<std::size_t>(i)] == static_cast<float>(i + 6));
    CHECK(got_y[static_cast<std::size_t>(i)] == static_cast<float>(i + 4));
  }
  CHECK(got_x[kCount - 1] == 0.0f);
  CHECK(got_y[kCount - 1] == 1.0f);
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
  REQUIRE(cudaFree(x) == cudaSuccess);
  REQUIRE(cudaFree(y) == cudaSuccess);
}

TEST_CASE("emulator graph: synchronizing or copying to the host inside a capture is refused",
          "[emulator]") {
  CleanContext context;
  float* x = device_floats(ramp());
  std::vector<float> host(kCount);
  for (cudaStreamCaptureMode mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                     cudaStreamCaptureModeRelaxed}) {
    CAPTURE(static_cast<int>(mode));
    check_refused(mode, cudaErrorStreamCaptureUnsupported,
                  [](cudaStream_t s) { return cudaStreamSynchronize(s); });
    check_refused(mode, cudaErrorStreamCaptureUnsupported, [&](cudaStream_t s) {
      return cudaMemcpyAsync(host.data(), x, sizeof(float) * kCount, cudaMemcpyDeviceToHost, s);
    });
    check_refused(mode, cudaErrorStreamCaptureUnsupported, [&](cudaStream_t s) {
      return cudaMemcpyAsync(x, host.data(), sizeof(float) * kCount, cudaMemcpyHostToDevice, s);
    });
  }
  // What the mode forbids to the capturing thread: cudaMalloc, a synchronous copy, a device
  // synchronization, and work on the legacy stream.
  for (cudaStreamCaptureMode mode :
       {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal}) {
    CAPTURE(static_cast<int>(mode));
    check_refused(mode, cudaErrorStreamCaptureUnsupported, [](cudaStream_t) {
      void* p = nullptr;
      return cudaMalloc(&p, 64);
    });
    check_refused(mode, cudaErrorStreamCaptureUnsupported, [&](cudaStream_t) {
      return cudaMemcpy(host.data(), x, sizeof(float) * kCount, cudaMemcpyDeviceToHost);
    });
    check_refused(mode, cudaErrorStreamCaptureUnsupported,
                  [](cudaStream_t) { return cudaDeviceSynchronize(); });
    check_refused(mode, cudaErrorStreamCaptureImplicit,
                  [&](cudaStream_t) { return sample::add_on_stream(x, kCount, 1.0f, nullptr); });
  }
  CHECK(host_floats(x, kCount) == ramp());  // nothing refused ran
  REQUIRE(cudaFree(x) == cudaSuccess);
}

TEST_CASE("emulator graph: the capture mode decides what other threads may do", "[emulator]") {
  CleanContext context;
  auto malloc_elsewhere = [] {
    cudaError_t error = cudaSuccess;
    std::thread other([&] {
      void* p = nullptr;
      error = cudaMalloc(&p, 64);
      if (error == cudaSuccess) error = cudaFree(p);
    });
    other.join();
    return error;
  };
  cudaStream_t stream = new_stream();
  // Thread-local: another thread's cudaMalloc is its own business; the capture stays valid.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  CHECK(malloc_elsewhere() == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  // Global: refused from any thread.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  CHECK(malloc_elsewhere() == cudaErrorStreamCaptureUnsupported);
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
  // Ending another thread's thread-local capture is refused.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  cudaError_t ended_elsewhere = cudaSuccess;
  std::thread other([&] { ended_elsewhere = cudaStreamEndCapture(stream, &graph); });
  other.join();
  CHECK(ended_elsewhere == cudaErrorStreamCaptureWrongThread);
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  // The legacy stream cannot capture; ending a capture that never began is an error.
  CHECK(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal) ==
        cudaErrorStreamCaptureUnsupported);
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorIllegalState);
  (void)cudaGetLastError();
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("emulator graph: memory a capture allocates lives with the graph, poisoned per replay",
          "[emulator]") {
  CleanContext context;
  const std::size_t before = emu::allocated_device_bytes();
  float* y = device_floats(std::vector<float>(kCount, 0.0f));
  cudaStream_t stream = new_stream();
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  void* scratch = nullptr;
  REQUIRE(cudaMallocAsync(&scratch, sizeof(float) * kCount, stream) == cudaSuccess);
  // Copied out as allocated (0xFF bytes), then given back: each replay sees fresh poison, even
  // after the previous replay wrote into it.
  REQUIRE(cudaMemcpyAsync(y, scratch, sizeof(float) * kCount, cudaMemcpyDeviceToDevice, stream) ==
          cudaSuccess);
  REQUIRE(cudaMemsetAsync(scratch, 0, sizeof(float) * kCount, stream) == cudaSuccess);
  REQUIRE(cudaFreeAsync(scratch, stream) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph) == cudaSuccess);
  CHECK(emu::allocated_device_bytes() == before + 2 * sizeof(float) * kCount);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);  // the instance keeps the memory
  for (int replay = 0; replay < 2; ++replay) {
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    for (float v : host_floats(y, kCount)) CHECK(std::isnan(v));
  }
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(emu::allocated_device_bytes() == before + sizeof(float) * kCount);
  REQUIRE(cudaFree(y) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("emulator graph: a replay that reads freed memory fails as a GPU would", "[emulator]") {
  CleanContext context;
  float* x = device_floats(ramp());
  cudaStream_t stream = new_stream();
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(sample::add_on_stream(x, kCount, 1.0f, stream) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph) == cudaSuccess);
  REQUIRE(cudaFree(x) == cudaSuccess);
  CHECK(cudaGraphLaunch(exec, stream) == cudaErrorInvalidDevicePointer);
  CHECK(cudaGetLastError() == cudaErrorInvalidDevicePointer);
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}
