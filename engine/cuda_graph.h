// A CUDA graph of one step: the CUDA work a piece of engine code issues, captured once and
// replayed, as PyTorch's torch.cuda.graph. A replay is one launch (cudaGraphLaunch) for the whole
// step: no host work per kernel, no autograd graph built, no allocation, no synchronization.
//
// Contract of the captured step (what makes a replay equal to running it again):
//   - It runs on CUDA tensors and issues its work on the current stream (every engine op does);
//     the capture switches the current stream to a stream of its own for the duration.
//   - It is warmed up: the same step ran once eagerly before, so the allocator's cache holds the
//     block sizes it asks for (a capture cannot call cudaMalloc; engine/allocator.h).
//   - It never waits for the device or reads device data on the host (no item(), to_vector(),
//     copies to the host): those fail the capture with an engine::Error naming the refused call.
//   - Its inputs and outputs are tensors that live as long as the graph, at fixed addresses: a
//     replay reads and writes the memory the capture saw. Tensors the step allocates come from
//     the graph's private pool (allocator.h) and stay the graph's until it is destroyed; to use a
//     result, keep the tensor the step produced (or copy into a buffer of your own inside it).
//   - Host-side decisions (shapes, which kernel, values read from the host) are frozen at capture.
#pragma once

#include <cstdint>
#include <functional>

namespace engine {

class CudaGraph {
 public:
  // Captures `step` (not run: nothing it launches executes until replay()). Throws
  // engine::Error, with nothing captured and the thread's stream and allocator as before, when the
  // step throws or makes a call a capture refuses, or without a CUDA device.
  explicit CudaGraph(const std::function<void()>& step);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Runs the captured work once more, on the calling thread's current stream.
  void replay() const;

 private:
  void* exec_ = nullptr;  // cudaGraphExec_t
  int64_t pool_ = 0;      // the allocator's graph pool
};

}  // namespace engine
