// The CUDA emulator's streams, stream capture and graphs (contract: the top of
// include/cuda_runtime.h). A stream is a tag with, while it captures, the capture: its mode, the
// thread that began it, whether a refused call has invalidated it, and the nodes recorded so far.
// A graph is the list of nodes in the order they were issued (one stream, so that order is the
// dependency order); an instance shares the nodes and the graph's memory, so the memory lives
// until the graph and all its instances are destroyed.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "tests/support/cuda_emulator/state.h"

namespace {

using emu::detail::api_mutex;
using emu::detail::record;
using emu::detail::sticky_error;

struct Node {
  enum class Kind { kKernel, kCopy, kMemset, kAllocate, kFree };
  explicit Node(Kind kind_) : kind(kind_) {}
  Kind kind;
  // kKernel
  const char* kernel_name = "";
  emu::LaunchConfig config{dim3(), dim3()};
  std::function<void()> body;
  std::function<bool()> arguments_ok;
  // kCopy, kMemset, kAllocate, kFree
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
  int value = 0;
};

// The device memory a capture allocated: the graph's until it and its instances are gone.
struct GraphMemory {
  std::vector<void*> blocks;
  ~GraphMemory() {  // destroyed with api_mutex held (cudaGraphDestroy, cudaGraphExecDestroy)
    for (void* block : blocks) emu::detail::free_locked(block);
  }
};

struct Capture {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;
  bool invalidated = false;
  std::vector<Node> nodes;
  std::shared_ptr<GraphMemory> memory = std::make_shared<GraphMemory>();
  std::set<void*> allocated;  // what this capture's allocation nodes returned
};

}  // namespace

struct CUstream_st {
  unsigned flags = cudaStreamDefault;
  std::unique_ptr<Capture> capture;
};

struct CUgraph_st {
  std::shared_ptr<const std::vector<Node>> nodes;
  std::shared_ptr<GraphMemory> memory;
};

struct CUgraphExec_st {
  std::shared_ptr<const std::vector<Node>> nodes;
  std::shared_ptr<GraphMemory> memory;
};

namespace {

std::set<cudaStream_t> capturing_streams;  // those whose capture is active or invalidated
std::set<cudaStream_t> live_streams;
std::set<cudaGraph_t> live_graphs;
std::set<cudaGraphExec_t> live_execs;

// Whether `capture` forbids unsafe calls (and legacy-stream work) to the calling thread.
bool forbids_this_thread(const Capture& capture) {
  switch (capture.mode) {
    case cudaStreamCaptureModeGlobal:
      return true;
    case cudaStreamCaptureModeThreadLocal:
      return capture.thread == std::this_thread::get_id();
    case cudaStreamCaptureModeRelaxed:
      return false;
  }
  return true;
}

cudaError_t refuse(cudaStream_t stream, cudaError_t error, const char* what) {
  std::fprintf(stderr, "CUDA emulator: %s while stream %p captures: %s (the capture is invalid)\n",
               what, static_cast<void*>(stream), cudaGetErrorString(error));
  if (stream != nullptr && stream->capture != nullptr) stream->capture->invalidated = true;
  return record(error);
}

bool is_capturing(cudaStream_t stream) {
  return stream != nullptr && live_streams.count(stream) != 0 && stream->capture != nullptr;
}

Capture& capture_of(cudaStream_t stream) { return *stream->capture; }

void append(cudaStream_t stream, Node node) { capture_of(stream).nodes.push_back(std::move(node)); }

}  // namespace

namespace emu::detail {

cudaError_t route(cudaStream_t stream, const char* what, StreamRoute* where) {
  *where = StreamRoute::kRunNow;
  if (is_capturing(stream)) {
    if (capture_of(stream).invalidated)
      return refuse(stream, cudaErrorStreamCaptureInvalidated, what);
    *where = StreamRoute::kRecord;
    return cudaSuccess;
  }
  if (stream != nullptr) return cudaSuccess;
  // The legacy stream, from a thread that a capture watches.
  cudaError_t error = cudaSuccess;
  for (cudaStream_t capturing : capturing_streams) {
    if (forbids_this_thread(capture_of(capturing))) {
      error = refuse(capturing, cudaErrorStreamCaptureImplicit, what);
    }
  }
  return error;
}

cudaError_t check_capture_allows(const char* what) {
  cudaError_t error = cudaSuccess;
  for (cudaStream_t capturing : capturing_streams) {
    if (forbids_this_thread(capture_of(capturing))) {
      error = refuse(capturing, cudaErrorStreamCaptureUnsupported, what);
    }
  }
  return error;
}

cudaError_t refuse_in_capture(cudaStream_t stream, const char* what) {
  return refuse(stream, cudaErrorStreamCaptureUnsupported, what);
}

void capture_status_locked(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  *status = !is_capturing(stream)            ? cudaStreamCaptureStatusNone
            : capture_of(stream).invalidated ? cudaStreamCaptureStatusInvalidated
                                             : cudaStreamCaptureStatusActive;
}

void record_copy(cudaStream_t stream, void* dst, const void* src, std::size_t bytes) {
  Node node(Node::Kind::kCopy);
  node.dst = dst;
  node.src = src;
  node.bytes = bytes;
  append(stream, std::move(node));
}

void record_memset(cudaStream_t stream, void* ptr, int value, std::size_t bytes) {
  Node node(Node::Kind::kMemset);
  node.dst = ptr;
  node.value = value;
  node.bytes = bytes;
  append(stream, std::move(node));
}

cudaError_t record_allocation(cudaStream_t stream, void** ptr, std::size_t bytes) {
  const cudaError_t error = allocate_locked(ptr, bytes);
  if (error != cudaSuccess || *ptr == nullptr) return error;
  Capture& capture = capture_of(stream);
  capture.memory->blocks.push_back(*ptr);
  capture.allocated.insert(*ptr);
  Node node(Node::Kind::kAllocate);
  node.dst = *ptr;
  node.bytes = bytes;
  append(stream, std::move(node));
  return cudaSuccess;
}

cudaError_t record_free(cudaStream_t stream, void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  Capture& capture = capture_of(stream);
  if (capture.allocated.count(ptr) == 0) {
    return refuse(stream, cudaErrorStreamCaptureUnsupported,
                  "cudaFreeAsync of memory the capture did not allocate (not emulated)");
  }
  Node node(Node::Kind::kFree);
  node.dst = ptr;
  append(stream, std::move(node));
  return cudaSuccess;
}

}  // namespace emu::detail

namespace emu {

void submit_launch(const char* kernel_name, const LaunchConfig& config, std::function<void()> body,
                   std::function<bool()> arguments_ok) {
  {
    std::lock_guard<std::mutex> lock(api_mutex);
    if (sticky_error != cudaSuccess) {
      record(sticky_error);
      return;
    }
    detail::StreamRoute where;
    const std::string what = std::string("launch of kernel ") + kernel_name;
    if (detail::route(config.stream, what.c_str(), &where) != cudaSuccess) return;
    if (where == detail::StreamRoute::kRecord) {
      Node node(Node::Kind::kKernel);
      node.kernel_name = kernel_name;
      node.config = config;
      node.body = std::move(body);
      node.arguments_ok = std::move(arguments_ok);
      append(config.stream, std::move(node));
      return;
    }
  }
  run_grid(kernel_name, config, body);
}

}  // namespace emu

// ---- the runtime API ---------------------------------------------------------------------------
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  std::lock_guard<std::mutex> lock(api_mutex);
  if (stream == nullptr || (flags & ~cudaStreamNonBlocking) != 0)
    return record(cudaErrorInvalidValue);
  *stream = new CUstream_st();
  (*stream)->flags = flags;
  live_streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(api_mutex);
  if (stream == nullptr || live_streams.erase(stream) == 0)
    return record(cudaErrorInvalidResourceHandle);
  capturing_streams.erase(stream);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  std::lock_guard<std::mutex> lock(api_mutex);
  if (stream == nullptr) {
    std::fprintf(stderr, "CUDA emulator: the legacy stream cannot be captured\n");
    return record(cudaErrorStreamCaptureUnsupported);
  }
  if (live_streams.count(stream) == 0) return record(cudaErrorInvalidResourceHandle);
  if (stream->capture != nullptr) return record(cudaErrorIllegalState);
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed) {
    return record(cudaErrorInvalidValue);
  }
  stream->capture = std::make_unique<Capture>();
  stream->capture->mode = mode;
  stream->capture->thread = std::this_thread::get_id();
  capturing_streams.insert(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  std::lock_guard<std::mutex> lock(api_mutex);
  if (graph != nullptr) *graph = nullptr;
  if (!is_capturing(stream)) return record(cudaErrorIllegalState);
  if (capture_of(stream).mode != cudaStreamCaptureModeRelaxed &&
      capture_of(stream).thread != std::this_thread::get_id()) {
    return record(cudaErrorStreamCaptureWrongThread);
  }
  std::unique_ptr<Capture> capture = std::move(stream->capture);
  capturing_streams.erase(stream);
  if (capture->invalidated || graph == nullptr) {
    // The memory it allocated is freed with it (capture->memory's last owner).
    return record(capture->invalidated ? cudaErrorStreamCaptureInvalidated : cudaErrorInvalidValue);
  }
  *graph = new CUgraph_st{std::make_shared<const std::vector<Node>>(std::move(capture->nodes)),
                          capture->memory};
  live_graphs.insert(*graph);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  std::lock_guard<std::mutex> lock(api_mutex);
  if (status == nullptr) return record(cudaErrorInvalidValue);
  emu::detail::capture_status_locked(stream, status);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  std::lock_guard<std::mutex> lock(api_mutex);
  if (exec == nullptr || live_graphs.count(graph) == 0) return record(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->nodes, graph->memory};
  live_execs.insert(*exec);
  return cudaSuccess;
}

namespace {

// One node of a replay, on the launching stream (which does not capture).
cudaError_t replay_node(const Node& node) {
  switch (node.kind) {
    case Node::Kind::kKernel:
      if (!node.arguments_ok()) {
        emu::fail_launch(cudaErrorInvalidDevicePointer, node.kernel_name,
                         "a pointer argument is no longer device memory (graph replay)");
        return cudaErrorInvalidDevicePointer;
      }
      emu::run_grid(node.kernel_name, node.config, node.body);
      return cudaSuccess;
    case Node::Kind::kCopy: {
      std::lock_guard<std::mutex> lock(api_mutex);
      return emu::detail::copy_locked(node.dst, node.src, node.bytes, cudaMemcpyDeviceToDevice);
    }
    case Node::Kind::kMemset: {
      std::lock_guard<std::mutex> lock(api_mutex);
      return emu::detail::memset_locked(node.dst, node.value, node.bytes);
    }
    case Node::Kind::kAllocate: {  // what a graph allocates holds nothing defined at first
      std::lock_guard<std::mutex> lock(api_mutex);
      return emu::detail::memset_locked(node.dst, 0xFF, node.bytes);
    }
    case Node::Kind::kFree:
      return cudaSuccess;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  std::shared_ptr<const std::vector<Node>> nodes;
  {
    std::lock_guard<std::mutex> lock(api_mutex);
    if (live_execs.count(exec) == 0) return record(cudaErrorInvalidValue);
    if (stream != nullptr && live_streams.count(stream) == 0)
      return record(cudaErrorInvalidResourceHandle);
    if (is_capturing(stream)) {
      return refuse(stream, cudaErrorStreamCaptureUnsupported,
                    "cudaGraphLaunch into a capture (not emulated)");
    }
    emu::detail::StreamRoute where;
    const cudaError_t refused = emu::detail::route(stream, "cudaGraphLaunch", &where);
    if (refused != cudaSuccess) return refused;
    if (sticky_error != cudaSuccess) return record(sticky_error);
    nodes = exec->nodes;
  }
  for (const Node& node : *nodes) {
    const cudaError_t error = replay_node(node);
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  std::lock_guard<std::mutex> lock(api_mutex);
  if (live_execs.erase(exec) == 0) return record(cudaErrorInvalidValue);
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  std::lock_guard<std::mutex> lock(api_mutex);
  if (live_graphs.erase(graph) == 0) return record(cudaErrorInvalidValue);
  delete graph;
  return cudaSuccess;
}
