// Tape-based reverse-mode autodiff.
//
// Every differentiable op, when grad mode is on and one of its inputs requires grad, appends a
// Node to the tape: its inputs, its outputs, the tensors its backward needs, and the backward
// function itself. The tape is therefore in execution order. backward(loss) walks it in
// reverse: each node reads the gradient of its outputs and adds (+=) the gradient of its inputs.
// Nodes are dropped as soon as they have run, which frees the activations they saved; after
// backward the tape is empty and the next forward records a fresh one.
//
// The tape is per thread. Ops record through record(); they never touch Node or Tape directly.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace qkgrad {

// ---- grad mode ----
bool grad_enabled();

// While alive, ops record nothing (inference, optimizer updates, inside backward).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// ---- the tape ----
class BackwardContext;
using LeafGradHook = std::function<void(const Tensor& leaf)>;  // backward(root, seed, hook) below
using BackwardFn = std::function<void(BackwardContext&)>;

struct SavedTensor {
  Tensor tensor;     // may be undefined (a named one an op did not need this time)
  uint64_t version;  // storage version when saved; must be unchanged at backward time
  const char* name = nullptr;  // record_named's name, for ctx.saved("q")
};

// A tensor saved for backward under a name (record_named).
struct NamedSaved {
  const char* name;
  Tensor tensor;
};

struct Node {
  const char* op = nullptr;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  std::vector<SavedTensor> saved;
  BackwardFn backward;
};

class Tape {
 public:
  Tape();
  std::size_t size() const { return nodes_.size(); }
  uint64_t epoch() const { return epoch_; }
  // Drops every node, e.g. after a forward pass done with grad mode on but never backpropagated.
  void clear();

 private:
  friend void record(const char*, std::vector<Tensor>, std::vector<Tensor>,
                     std::vector<Tensor>, BackwardFn);
  friend void record_named(const char*, std::vector<Tensor>, std::vector<Tensor>,
                           std::vector<NamedSaved>, BackwardFn);
  friend void backward(const Tensor&, const Tensor&, const LeafGradHook&);
  std::vector<Node> nodes_;
  // A number no other tape (of any thread) has used: a tensor's node is valid only while the
  // tape it was recorded on still has the same epoch. Every clear takes a fresh one.
  uint64_t epoch_;
};

Tape& tape();  // this thread's tape

// What an op's backward function sees.
class BackwardContext {
 public:
  explicit BackwardContext(Node& node) : node_(node) {}

  const char* op() const { return node_.op; }
  // d(loss)/d(output k); zeros if no gradient reached that output.
  Tensor grad_output(int k = 0) const;
  const Tensor& input(int i) const;
  int node_inputs() const { return static_cast<int>(node_.inputs.size()); }
  bool needs_grad(int i) const;  // does input i require a gradient?
  // Saved tensor j, after checking nobody wrote to it in place since the forward pass.
  const Tensor& saved(int j) const;
  // The saved tensor of that name (record_named), checked the same way; undefined if it was.
  const Tensor& saved(const char* name) const;

  // input i's gradient += grad (grad must have input i's shape and dtype).
  void accumulate(int i, Tensor grad);

  // For kernels that can either write or add (GEMM's beta): the gradient buffer of input i and
  // whether the kernel must add to it (true) or may overwrite it (false: freshly allocated).
  struct GradTarget {
    Tensor buffer;
    bool accumulate;
  };
  GradTarget grad_target(int i);

 private:
  Node& node_;
};

// True when an op with these inputs must record a node.
template <typename... Tensors>
bool should_record(const Tensors&... inputs) {
  return grad_enabled() && (inputs.requires_grad() || ...);
}

// Appends a node. Outputs become non-leaf tensors that require grad.
void record(const char* op, std::vector<Tensor> inputs, std::vector<Tensor> outputs,
            std::vector<Tensor> saved, BackwardFn backward);

// record, with the saved tensors named, for ops that save many (the fused attention): the
// backward reads them as ctx.saved("name"), not by position. Undefined tensors may be saved.
void record_named(const char* op, std::vector<Tensor> inputs, std::vector<Tensor> outputs,
                  std::vector<NamedSaved> saved, BackwardFn backward);

// Runs the backward pass from root with d(loss)/d(root) = seed, then clears the tape.
void backward(const Tensor& root, const Tensor& seed);

// The same, with a hook called for each leaf (a parameter) as soon as its gradient is final: the
// last node that feeds it has run. A generic hook; data-parallel training, above core
// (distributed/gradient_reducer.h), starts summing gradients over the processes then.
void backward(const Tensor& root, const Tensor& seed, const LeafGradHook& on_leaf_final);

// The gradient buffer of a leaf, allocated as zeros if no backward has reached it yet: what a
// process that had no data this step contributes to a sum of gradients.
Tensor grad_buffer(const Tensor& leaf);

}  // namespace qkgrad
