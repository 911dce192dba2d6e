// The tape walk behind backward() and grad().
//
// 1. Collect the nodes reachable from the outputs (iterative DFS over Node::next).
// 2. Mark which nodes lead to a target: for backward(), any leaf that requires grad; for grad(),
//    the listed inputs (leaves by impl, non-leaves by their producing node).
// 3. Visit the marked nodes in reverse topological order (every consumer before its producer),
//    summing incoming gradients per node, and call each node's backward with `needs[i]` true only
//    for inputs on a path to a target.
// 4. For backward(): a leaf's gradient is final once every node with an edge to it has run (a
//    count of pending edges per leaf); it is then delivered into .grad and the gradient-ready hook
//    (engine/grad_ready.h) is told, while the walk goes on.
#include "engine/autograd.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "engine/grad_ready.h"
#include "engine/ops.h"

namespace engine {

namespace {
thread_local bool grad_mode = true;
thread_local GradTrace* active_trace = nullptr;
thread_local GradReadyHook* active_grad_ready_hook = nullptr;
}  // namespace

bool grad_mode_enabled() { return grad_mode; }

NoGradGuard::NoGradGuard() : previous_(grad_mode) { grad_mode = false; }
NoGradGuard::~NoGradGuard() { grad_mode = previous_; }

GradTrace::GradTrace() : previous_(active_trace) { active_trace = this; }
GradTrace::~GradTrace() { active_trace = previous_; }
bool GradTrace::contains(const std::string& entry) const {
  return std::find(computed_.begin(), computed_.end(), entry) != computed_.end();
}
void trace_gradient(const std::string& entry) {
  if (active_trace != nullptr) active_trace->computed_.push_back(entry);
}

GradReadyHook::GradReadyHook(std::function<void(const Tensor& leaf)> on_ready)
    : on_ready_(std::move(on_ready)), previous_(active_grad_ready_hook) {
  active_grad_ready_hook = this;
}
GradReadyHook::~GradReadyHook() { active_grad_ready_hook = previous_; }
void GradReadyHook::notify(const Tensor& leaf) {
  if (active_grad_ready_hook != nullptr) active_grad_ready_hook->on_ready_(leaf);
}

bool needs_tape(const std::vector<Tensor>& inputs) {
  if (!grad_mode) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

Tensor record(const std::string& op, const std::vector<Tensor>& inputs, Tensor output,
              BackwardFn backward_fn, const std::vector<Saved>& saved) {
  auto node = std::make_shared<Node>();
  node->op = op;
  node->backward = std::move(backward_fn);
  for (const Saved& s : saved) {
    if (!s.tensor.defined()) continue;
    const std::shared_ptr<Storage>& storage = s.tensor.impl()->storage;
    node->saved.push_back(SavedVersion{s.what, storage, storage->version()});
  }
  node->output_shape = output.shape();
  node->output_dtype = output.dtype();
  node->output_device = output.device();
  for (const Tensor& input : inputs) {
    Edge edge;
    if (input.defined() && input.requires_grad()) {
      if (input.is_leaf()) {
        edge.leaf = input.impl_ptr();
      } else {
        edge.node = input.grad_fn();
      }
    }
    node->next.push_back(std::move(edge));
  }
  // Always a fresh impl, so an op that hands back one of its inputs never turns that input into
  // a non-leaf.
  Tensor result = output.detach();
  result.impl()->requires_grad = true;
  result.impl()->grad_fn = std::move(node);
  return result;
}

namespace {

// What we are differentiating towards.
struct Targets {
  bool all_leaves = false;  // backward(): every leaf that requires grad
  std::unordered_set<const TensorImpl*> leaves;
  std::unordered_set<const Node*> nodes;

  bool is_target_leaf(const TensorImpl* leaf) const {
    return all_leaves ? leaf != nullptr : leaves.count(leaf) > 0;
  }
};

// Nodes reachable from the roots, in an order where every node comes after all its consumers.
std::vector<Node*> reverse_topological(const std::vector<Node*>& roots) {
  std::vector<Node*> post_order;
  std::unordered_set<Node*> visited;
  std::vector<std::pair<Node*, size_t>> stack;
  for (Node* root : roots) {
    if (root == nullptr || !visited.insert(root).second) continue;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [node, next_index] = stack.back();
      if (next_index < node->next.size()) {
        Node* child = node->next[next_index++].node.get();
        if (child != nullptr && visited.insert(child).second) stack.emplace_back(child, 0);
      } else {
        post_order.push_back(node);
        stack.pop_back();
      }
    }
  }
  std::reverse(post_order.begin(), post_order.end());
  return post_order;
}

void accumulate(std::unordered_map<const void*, Tensor>& sums, const void* key, const Tensor& g) {
  auto it = sums.find(key);
  if (it == sums.end()) {
    sums.emplace(key, g);
  } else {
    it->second = add(it->second, g);
  }
}

Tensor ones_like_output(const Tensor& output) {
  return Tensor::ones(output.shape(), output.dtype(), output.device());
}

// Called with a target leaf and its gradient sum as soon as no node left to run sends it more.
using LeafFinal = std::function<void(const std::shared_ptr<TensorImpl>& leaf, const Tensor& sum)>;

// Per target leaf: the edges to it from nodes that will run (those that lead to a target).
std::unordered_map<const TensorImpl*, int64_t> pending_leaf_edges(
    const std::vector<Node*>& order, const std::unordered_map<const Node*, bool>& leads,
    const Targets& targets) {
  std::unordered_map<const TensorImpl*, int64_t> pending;
  for (Node* node : order) {
    if (!leads.at(node)) continue;
    for (const Edge& e : node->next) {
      if (e.leaf && targets.is_target_leaf(e.leaf.get())) ++pending[e.leaf.get()];
    }
  }
  return pending;
}

// Runs the marked part of the graph. Returns the gradient sums keyed by Node* (for non-leaf
// targets) and TensorImpl* (for leaves). With `leaf_final`, each leaf reached through the graph
// is handed to it (and dropped from the sums) as soon as its sum is final.
std::unordered_map<const void*, Tensor> run_backward(const std::vector<Tensor>& outputs,
                                                     const std::vector<Tensor>& grad_outputs,
                                                     const Targets& targets, bool retain_graph,
                                                     const LeafFinal& leaf_final = nullptr) {
  NoGradGuard no_grad;  // backward functions compose ops; nothing of it is recorded
  std::unordered_map<const void*, Tensor> sums;
  std::vector<Node*> roots;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& out = outputs[k];
    ENGINE_CHECK(out.defined(), "backward: output ", k, " is undefined");
    Tensor g = grad_outputs.size() > k && grad_outputs[k].defined() ? grad_outputs[k]
                                                                    : ones_like_output(out);
    ENGINE_CHECK(g.shape() == out.shape(), "backward: gradient for output ", k, " has shape ",
                 shape_str(g.shape()), " but the output has shape ", shape_str(out.shape()));
    // Else an f64 or CUDA gradient would flow into an f32 CPU graph and land in a leaf's .grad.
    ENGINE_CHECK(g.dtype() == out.dtype() && g.device() == out.device(),
                 "backward: gradient for output ", k, " is ", dtype_name(g.dtype()), " on ",
                 g.device().str(), " but the output is ", dtype_name(out.dtype()), " on ",
                 out.device().str());
    if (!out.requires_grad()) continue;
    if (out.is_leaf()) {
      if (targets.is_target_leaf(out.impl())) accumulate(sums, out.impl(), g);
      continue;
    }
    roots.push_back(out.grad_fn().get());
    accumulate(sums, out.grad_fn().get(), g);
  }

  std::vector<Node*> order = reverse_topological(roots);
  // leads[node]: some path from node reaches a target. Producers come later in `order`, so walk
  // it backwards to see every producer before its consumers.
  std::unordered_map<const Node*, bool> leads;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* node = *it;
    bool any = false;
    for (const Edge& e : node->next) {
      if (e.leaf && targets.is_target_leaf(e.leaf.get())) any = true;
      if (e.node && (targets.nodes.count(e.node.get()) || leads[e.node.get()])) any = true;
    }
    leads[node] = any;
  }
  std::unordered_map<const TensorImpl*, int64_t> pending;
  if (leaf_final) pending = pending_leaf_edges(order, leads, targets);
  // The node has run (or will not): its edges to leaves are no longer pending.
  auto node_done = [&](const Node* node) {
    if (!leaf_final) return;
    for (const Edge& e : node->next) {
      if (!e.leaf || !targets.is_target_leaf(e.leaf.get())) continue;
      if (--pending[e.leaf.get()] > 0) continue;
      auto sum = sums.find(e.leaf.get());
      if (sum == sums.end()) continue;
      const Tensor final_sum = sum->second;
      sums.erase(sum);
      leaf_final(e.leaf, final_sum);
    }
  };

  for (Node* node : order) {
    if (!leads[node]) continue;
    auto found = sums.find(node);
    if (found == sums.end()) {  // no gradient flows into this node
      node_done(node);
      continue;
    }
    ENGINE_CHECK(!node->released, "backward through a graph that has already been freed (node '",
                 node->op,
                 "'); pass retain_graph = true to the first backward/grad call if you need to "
                 "differentiate twice");
    for (const SavedVersion& s : node->saved) {
      ENGINE_CHECK(s.storage->version() == s.version, "backward of '", node->op, "': its ", s.what,
                   ", saved for the backward, was written in place after the forward (version ",
                   s.version, " then, ", s.storage->version(),
                   " now: copy_, fill_ or an optimizer step into it or into a view of the same "
                   "memory), so the gradient would be wrong; write into a clone() instead, or "
                   "after the backward");
    }
    std::vector<bool> needs(node->next.size(), false);
    for (size_t i = 0; i < node->next.size(); ++i) {
      const Edge& e = node->next[i];
      needs[i] = (e.leaf && targets.is_target_leaf(e.leaf.get())) ||
                 (e.node && (targets.nodes.count(e.node.get()) || leads[e.node.get()]));
    }
    Tensor grad_output = found->second;
    if (!targets.nodes.count(node)) sums.erase(found);  // free memory as we go
    std::vector<Tensor> input_grads = node->backward(grad_output, needs);
    ENGINE_CHECK(input_grads.size() == node->next.size(), "internal: backward of '", node->op,
                 "' returned ", input_grads.size(), " gradients for ", node->next.size(),
                 " inputs");
    for (size_t i = 0; i < input_grads.size(); ++i) {
      const Tensor& g = input_grads[i];
      if (!needs[i]) {
        ENGINE_CHECK(!g.defined(), "internal: backward of '", node->op,
                     "' computed an unrequested gradient for input ", i);
        continue;
      }
      ENGINE_CHECK(g.defined(), "internal: backward of '", node->op,
                   "' did not compute the gradient for input ", i);
      trace_gradient(node->op + ":" + std::to_string(i));
      const Edge& e = node->next[i];
      if (e.leaf) {
        ENGINE_CHECK(g.shape() == e.leaf->shape, "internal: backward of '", node->op,
                     "' gave a gradient of shape ", shape_str(g.shape()), " for input ", i,
                     " of shape ", shape_str(e.leaf->shape));
        accumulate(sums, e.leaf.get(), g);
      } else {
        ENGINE_CHECK(g.shape() == e.node->output_shape, "internal: backward of '", node->op,
                     "' gave a gradient of shape ", shape_str(g.shape()), " for input ", i,
                     " of shape ", shape_str(e.node->output_shape));
        accumulate(sums, e.node.get(), g);
      }
    }
    if (!retain_graph) {
      node->backward = nullptr;  // frees the tensors it captured...
      node->saved.clear();       // ...and what pinned their storages for the version check
      node->released = true;
    }
    node_done(node);
  }
  return sums;
}

}  // namespace

void backward(const Tensor& loss, const Tensor& grad_output, bool retain_graph) {
  ENGINE_CHECK(loss.defined(), "backward() of an undefined tensor");
  ENGINE_CHECK(loss.requires_grad(),
               "backward() of a tensor that does not require grad (was it computed under "
               "NoGradGuard, or from inputs that do not require grad?)");
  ENGINE_CHECK(grad_output.defined() || loss.numel() == 1,
               "backward() of a non-scalar tensor of shape ", shape_str(loss.shape()),
               " needs an explicit grad_output");
  Targets targets;
  targets.all_leaves = true;
  // Delivers a leaf's final sum into its .grad, then tells the gradient-ready hook.
  auto deliver = [](const std::shared_ptr<TensorImpl>& leaf, const Tensor& sum) {
    NoGradGuard no_grad;
    // A fresh contiguous buffer: backward functions may hand the same tensor to several inputs
    // (add) or return broadcast views (sum), and a leaf's .grad must own its memory.
    Tensor g = leaf->grad ? add(Tensor(leaf->grad), sum) : sum.detach().clone();
    leaf->grad = g.contiguous().impl_ptr();
    GradReadyHook::notify(Tensor(leaf));
  };
  std::unordered_map<const void*, Tensor> sums =
      run_backward({loss}, {grad_output}, targets, retain_graph, deliver);
  // Only a loss that is itself a leaf is left: no node sends it a gradient.
  if (loss.is_leaf()) {
    auto it = sums.find(loss.impl());
    if (it != sums.end()) deliver(loss.impl_ptr(), it->second);
  }
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph) {
  ENGINE_CHECK(!outputs.empty(), "grad(): no outputs given");
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& out = outputs[k];
    ENGINE_CHECK(out.defined(), "grad(): output ", k, " is undefined");
    ENGINE_CHECK((grad_outputs.size() > k && grad_outputs[k].defined()) || out.numel() == 1,
                 "grad(): output ", k, " of shape ", shape_str(out.shape()),
                 " is not a scalar; pass grad_outputs");
  }
  Targets targets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    ENGINE_CHECK(x.defined(), "grad(): input ", i, " is undefined");
    ENGINE_CHECK(x.requires_grad(), "grad(): input ", i, " (", x.str(),
                 ") does not require grad; call set_requires_grad(true) before using it");
    if (x.is_leaf()) {
      targets.leaves.insert(x.impl());
    } else {
      targets.nodes.insert(x.grad_fn().get());
    }
  }
  std::unordered_map<const void*, Tensor> sums =
      run_backward(outputs, grad_outputs, targets, retain_graph);
  std::vector<Tensor> result;
  for (const Tensor& x : inputs) {
    const void* key = x.is_leaf() ? static_cast<const void*>(x.impl())
                                  : static_cast<const void*>(x.grad_fn().get());
    auto it = sums.find(key);
    result.push_back(it != sums.end() ? it->second.detach()
                                      : Tensor::zeros(x.shape(), x.dtype(), x.device()));
  }
  return result;
}

}  // namespace engine
