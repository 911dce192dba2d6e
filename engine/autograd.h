// Reverse-mode automatic differentiation on a dynamic tape.
//
// Every differentiable op, when grad mode is on and some input requires a gradient, creates a
// Node holding (a) one Edge per input — to the Node that produced that input, or to the input
// itself if it is a leaf that requires grad — and (b) a backward function, written right below
// the op's forward in engine/ops/<op>.cpp. A node has exactly one output tensor.
//
// The backward function receives dL/d(output) and a mask `needs[i]` saying which inputs' gradients
// are wanted; it must return one tensor per input, undefined where needs[i] is false. The engine
// enforces that (an op that computes an unwanted gradient is a bug and throws), which is how
// grad(loss, {x}) skips every weight gradient: conv2d gets needs = {true, false, false} and never
// runs its wgrad kernel.
//
// Writes in place into what a backward reads are errors, as with PyTorch's version counters. An op
// that keeps tensors for its backward lists them in record(); the node remembers each one's
// storage version (storage.h), and the tape walk refuses to run the backward if a version moved:
// copy_/fill_ into the tensor (or another view of its storage), or an optimizer step on a weight,
// between the forward and the backward. The backward would read the new values and return a wrong
// gradient without a word (or, for index_select's saved index, write out of range). Writing into
// a tensor an op did not save (add's inputs, say) is allowed, as in PyTorch; writes through raw
// data<T>() pointers are invisible unless the writer calls Tensor::mark_written_in_place().
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace engine {

struct Edge {
  std::shared_ptr<Node> node;        // the producer of a non-leaf input, or
  std::shared_ptr<TensorImpl> leaf;  // a leaf input that requires grad; both null: no gradient
  bool defined() const { return node != nullptr || leaf != nullptr; }
};

using BackwardFn =
    std::function<std::vector<Tensor>(const Tensor& grad_output, const std::vector<bool>& needs)>;

// A tensor a backward function reads, as record() saw it: which one (for the error), its storage
// and that storage's version then.
struct SavedVersion {
  std::string what;  // "input", "weight", "output", ...
  std::shared_ptr<Storage> storage;
  uint64_t version = 0;
};

struct Node {
  std::string op;          // "conv2d", "add", ...: used in errors and traces
  std::vector<Edge> next;  // one per input of the op, in the op's argument order
  BackwardFn backward;     // cleared after use unless retain_graph
  std::vector<SavedVersion> saved;
  Shape output_shape;
  DType output_dtype = DType::F32;
  Device output_device;
  bool released = false;
};

// ---- grad mode -----------------------------------------------------------------------------
bool grad_mode_enabled();

// While alive, ops record nothing (thread-local): use for evaluation, optimizer steps, attacks'
// projections.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// ---- used by ops ---------------------------------------------------------------------------
// True when grad mode is on and any of the defined inputs requires grad.
bool needs_tape(const std::vector<Tensor>& inputs);

// A tensor the backward function keeps (captured in it), named for the error message. Tensors
// the op made for itself alone (a contiguous copy of a strided input, batch statistics) need not
// be listed: nothing else can write into them.
struct Saved {
  std::string what;
  Tensor tensor;  // undefined: nothing saved under this name (e.g. no bias)
};

// Records `output` as the result of `op` applied to `inputs` (undefined inputs allowed, e.g. a
// missing bias) and returns it with requires_grad and grad_fn set. `saved` lists what `backward`
// reads besides its gradient (inputs, or `output` itself), to be checked for writes in place.
// Call only when needs_tape().
Tensor record(const std::string& op, const std::vector<Tensor>& inputs, Tensor output,
              BackwardFn backward, const std::vector<Saved>& saved = {});

// ---- running backward ----------------------------------------------------------------------
// Accumulates dL/d(leaf) into `.grad` of every leaf that requires grad and that `loss` depends
// on. `loss` must have one element unless grad_output (same shape as loss) is given. The graph is
// freed afterwards unless retain_graph; a second backward through it is an error.
void backward(const Tensor& loss, const Tensor& grad_output = Tensor(), bool retain_graph = false);

// Returns d(sum_k <outputs[k], grad_outputs[k]>)/d(inputs[i]) for the listed inputs only; touches
// no `.grad` and runs only the nodes on a path from an output to a listed input, each asked only
// for the gradients that lead there. An input the outputs do not depend on gets zeros.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false);

// ---- tracing (tests, debugging) --------------------------------------------------------------
// While a GradTrace is alive, every gradient a backward function returns is logged as
// "<op>:<input index>", e.g. "conv2d:0" (dgrad) or "conv2d:1" (wgrad).
class GradTrace {
 public:
  GradTrace();
  ~GradTrace();
  const std::vector<std::string>& computed() const { return computed_; }
  bool contains(const std::string& entry) const;

 private:
  friend void trace_gradient(const std::string&);
  std::vector<std::string> computed_;
  GradTrace* previous_;
};

}  // namespace engine
