// CUDA graph capture and replay (contract in cuda_graph.h).
#include "engine/cuda_graph.h"

#include "engine/allocator.h"
#include "kernels/common/cuda_runtime.h"

namespace engine {

namespace {

// For the capture's duration: the thread's current stream is the capture stream, and its CUDA
// allocations come from the graph's pool. Undone on every way out.
class CaptureScope {
 public:
  explicit CaptureScope(void* stream)
      : stream_(stream), previous_stream_(kernels::cuda_current_stream()) {
    kernels::cuda_set_current_stream(stream_);
  }
  ~CaptureScope() {
    kernels::cuda_set_current_stream(previous_stream_);
    end_graph_pool_capture();
  }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  void* stream_;
  void* previous_stream_;
};

// The capture stream, destroyed on every way out.
class OwnedStream {
 public:
  OwnedStream() : stream_(kernels::cuda_stream_create()) {}
  ~OwnedStream() {
    try {
      kernels::cuda_stream_destroy(stream_);
    } catch (...) {  // a destructor must not throw; a stream leaked is the lesser harm
    }
  }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  void* get() const { return stream_; }

 private:
  void* stream_;
};

}  // namespace

CudaGraph::CudaGraph(const std::function<void()>& step) {
  OwnedStream stream;
  pool_ = begin_graph_pool_capture();
  try {
    CaptureScope scope(stream.get());
    kernels::cuda_begin_capture(stream.get());
    try {
      step();
    } catch (...) {
      kernels::cuda_abandon_capture(stream.get());
      throw;
    }
    exec_ = kernels::cuda_end_capture(stream.get());
  } catch (...) {
    release_graph_pool(pool_);
    throw;
  }
}

CudaGraph::~CudaGraph() {
  try {
    kernels::cuda_graph_destroy(exec_);
  } catch (...) {  // a broken context: nothing left to free
  }
  release_graph_pool(pool_);
}

void CudaGraph::replay() const { kernels::cuda_graph_launch(exec_); }

}  // namespace engine
