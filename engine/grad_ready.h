// The gradient-ready hook of backward() (engine/autograd.h; defined in engine/autograd.cpp).
//
// While a GradReadyHook is alive, engine::backward() calls it once for each leaf that it gives a
// gradient, as soon as that leaf's .grad is final: when the last node of the tape walk that sends
// the leaf a gradient has run, while the rest of the backward is still to come. Leaves are passed
// in that order (for a chain of layers: the last layer's parameters first). PyTorch's
// register_post_accumulate_grad_hook, which DistributedDataParallel uses to start a bucket's
// all-reduce while the backward goes on (tools/dml/data_parallel.cpp does the same). The tape walk
// knows a leaf is final by counting, per leaf, the edges to it of the nodes that will run.
// grad() touches no .grad and calls no hook; hooks do not nest (the innermost one is called).
#pragma once

#include <functional>

#include "engine/tensor.h"

namespace engine {

class GradReadyHook {
 public:
  explicit GradReadyHook(std::function<void(const Tensor& leaf)> on_ready);
  ~GradReadyHook();
  GradReadyHook(const GradReadyHook&) = delete;
  GradReadyHook& operator=(const GradReadyHook&) = delete;

  // Called by backward(): the innermost live hook of this thread, if any, is told `leaf` is final.
  static void notify(const Tensor& leaf);

 private:
  std::function<void(const Tensor& leaf)> on_ready_;
  GradReadyHook* previous_;
};

}  // namespace engine
