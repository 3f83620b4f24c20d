#include "core/autograd.h"

#include <cstring>

#include <atomic>
#include <unordered_map>
#include <unordered_set>

#include "core/backend.h"
#include "core/error.h"

namespace qkgrad {

namespace {
thread_local bool g_grad_enabled = true;

// Adds `grad` into the gradient slot of `impl` (allocating it on first use).
void add_into_grad(TensorImpl& impl, Tensor grad) {
  if (!impl.grad) {
    // Take the buffer over when nothing else can see it; otherwise copy it, so that two
    // gradients never share storage (a later += into one would corrupt the other).
    const bool unshared = grad.impl_ptr().use_count() == 1 &&
                          grad.impl()->storage.use_count() == 1 && grad.is_leaf() &&
                          !grad.requires_grad();
    impl.grad = unshared ? grad.impl_ptr() : grad.clone().impl_ptr();
    return;
  }
  Tensor acc(impl.grad);
  backend(acc.device()).axpy(1.0, grad, acc);
  acc.mark_written();
}
}  // namespace

bool grad_enabled() { return g_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

namespace {
uint64_t fresh_epoch() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}
}  // namespace

Tape::Tape() : epoch_(fresh_epoch()) {}

Tape& tape() {
  thread_local Tape t;
  return t;
}

void Tape::clear() {
  nodes_.clear();
  epoch_ = fresh_epoch();
}

// ---- BackwardContext ----

Tensor BackwardContext::grad_output(int k) const {
  const Tensor& out = node_.outputs.at(k);
  if (out.impl()->grad) return Tensor(out.impl()->grad);
  return Tensor::zeros(out.shape(), out.dtype(), out.device());
}

const Tensor& BackwardContext::input(int i) const { return node_.inputs.at(i); }

bool BackwardContext::needs_grad(int i) const { return input(i).requires_grad(); }

const Tensor& BackwardContext::saved(int j) const {
  const SavedTensor& s = node_.saved.at(j);
  if (!s.tensor.defined()) return s.tensor;  // a named slot the op left empty
  QKGRAD_CHECK(s.tensor.version() == s.version, "backward of op '", node_.op,
               "': a tensor it saved for the backward pass (", describe(s.tensor),
               ") was modified in place after the forward pass (version ", s.version, " -> ",
               s.tensor.version(), "), so its gradient would be wrong; make in-place updates "
               "only after backward()");
  return s.tensor;
}

const Tensor& BackwardContext::saved(const char* name) const {
  for (std::size_t j = 0; j < node_.saved.size(); ++j) {
    const SavedTensor& s = node_.saved[j];
    if (s.name == nullptr || std::strcmp(s.name, name) != 0) continue;
    return saved(static_cast<int>(j));
  }
  fail(cat("internal error in the backward of op '", node_.op, "': it saved no tensor named '", name, "'"));
}

void BackwardContext::accumulate(int i, Tensor grad) {
  const Tensor& in = input(i);
  if (!in.requires_grad()) return;
  QKGRAD_CHECK(grad.shape() == in.shape() && grad.dtype() == in.dtype() &&
                   grad.device() == in.device(),
               "internal error in the backward of op '", node_.op, "': the gradient for input ",
               i, " is ", describe(grad), " but the input is ", describe(in));
  add_into_grad(*in.impl(), std::move(grad));
}

BackwardContext::GradTarget BackwardContext::grad_target(int i) {
  TensorImpl& impl = *input(i).impl();
  if (!impl.grad) {
    impl.grad = Tensor::empty(impl.shape, impl.dtype, impl.device()).impl_ptr();
    return {Tensor(impl.grad), false};
  }
  Tensor(impl.grad).mark_written();
  return {Tensor(impl.grad), true};
}

// ---- recording and the backward pass ----

void record(const char* op, std::vector<Tensor> inputs, std::vector<Tensor> outputs,
            std::vector<Tensor> saved, BackwardFn backward_fn) {
  Tape& t = tape();
  // An input made by an op on a tape that is gone (consumed by backward, cleared, or another
  // thread's) would silently stop the gradient: refuse it.
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const TensorImpl* in = inputs[i].impl();
    QKGRAD_CHECK(!in->requires_grad || in->creator == nullptr || in->tape_epoch == t.epoch_, op,
                 ": input ", i, " (", describe(inputs[i]), ") was produced by op '", in->creator,
                 "' on a tape that backward() already consumed, or that was cleared, or that "
                 "belongs to another thread; no gradient can flow through it. Recompute it, or "
                 "detach() it to use it as a constant");
  }
  Node node;
  node.op = op;
  node.inputs = std::move(inputs);
  node.saved.reserve(saved.size());
  for (Tensor& s : saved) {
    const uint64_t version = s.defined() ? s.version() : 0;
    node.saved.push_back({std::move(s), version});
  }
  for (const Tensor& out : outputs) {
    TensorImpl& impl = *out.impl();
    impl.requires_grad = true;
    impl.creator = op;
    impl.tape_epoch = t.epoch_;
    impl.tape_index = t.nodes_.size();
  }
  node.outputs = std::move(outputs);
  node.backward = std::move(backward_fn);
  t.nodes_.push_back(std::move(node));
}

void backward(const Tensor& root, const Tensor& seed) { backward(root, seed, LeafGradHook{}); }

Tensor grad_buffer(const Tensor& leaf) {
  QKGRAD_CHECK(leaf.defined() && leaf.is_leaf() && leaf.requires_grad(), "grad_buffer(): ", describe(leaf),
               " is not a leaf that requires grad");
  TensorImpl& impl = *leaf.impl();
  if (!impl.grad) impl.grad = Tensor::zeros(leaf.shape(), leaf.dtype(), leaf.device()).impl_ptr();
  return Tensor(impl.grad);
}

namespace {

// The root's checks: defined, requiring grad, not yet backpropagated, and a seed like it.
TensorImpl& checked_root(const Tensor& root, const Tensor& seed) {
  QKGRAD_CHECK(root.defined(), "backward(): the tensor is undefined");
  QKGRAD_CHECK(seed.defined() && seed.shape() == root.shape() && seed.dtype() == root.dtype() &&
                   seed.device() == root.device(),
               "backward(): the seed gradient (", describe(seed), ") must match the tensor (",
               describe(root), ")");
  TensorImpl& r = *root.impl();
  QKGRAD_CHECK(!r.consumed_by_backward, "backward(): called twice on the same tensor (",
               describe(root), "); the first backward() consumed its tape. Run the forward pass "
               "again to record a new one");
  QKGRAD_CHECK(r.requires_grad, "backward(): the tensor (", describe(root),
               ") does not require grad: none of the tensors it was computed from requires grad, "
               "or it was computed under NoGradGuard");
  return r;
}

// The index of the node that made the root, checked to be on this thread's current tape.
std::size_t root_node(const Tape& t, const std::vector<Node>& nodes, const Tensor& root) {
  const TensorImpl& r = *root.impl();
  QKGRAD_CHECK(r.tape_epoch == t.epoch() && r.tape_index < nodes.size(), "backward(): the tensor (",
               describe(root), ") was made by op '", r.creator,
               "' on a tape that was since cleared or consumed by another backward(), or on "
               "another thread's tape; run the forward pass again");
  bool is_output = false;
  for (const Tensor& out : nodes[r.tape_index].outputs) is_output = is_output || out.impl() == &r;
  QKGRAD_CHECK(is_output, "backward(): internal error: the tape does not hold the node that made ",
               describe(root));
  return r.tape_index;
}

// Walks down from the root's node (`top`) over the nodes the gradient will reach (the root's,
// and any one of whose outputs feeds a reached tensor) and checks their saved tensors' versions
// before any gradient moves, so that a tensor overwritten in place fails the whole backward
// cleanly. With `plan_leaves`, returns for each node the leaves whose gradient is final once it
// has run: those it is the last (lowest) node to feed, in the order of its inputs (the same
// order on every process, for a hook that sums gradients over them).
std::vector<std::vector<Tensor>> check_reachable(std::vector<Node>& nodes, std::size_t top, const TensorImpl* root,
                                                 bool plan_leaves) {
  std::unordered_set<const TensorImpl*> reached = {root};
  std::unordered_map<const TensorImpl*, std::size_t> last_node_of_leaf;
  for (std::size_t i = top + 1; i-- > 0;) {
    Node& node = nodes[i];
    bool reachable = false;
    for (const Tensor& out : node.outputs) reachable = reachable || reached.count(out.impl()) > 0;
    if (!reachable) continue;
    for (const Tensor& in : node.inputs) {
      if (!in.requires_grad()) continue;
      reached.insert(in.impl());
      if (plan_leaves && in.is_leaf()) last_node_of_leaf.insert_or_assign(in.impl(), i);
    }
    BackwardContext ctx(node);
    for (std::size_t j = 0; j < node.saved.size(); ++j) ctx.saved(static_cast<int>(j));  // throws if overwritten
  }
  std::vector<std::vector<Tensor>> final_after(plan_leaves ? top + 1 : 0);
  for (std::size_t i = 0; plan_leaves && i <= top; ++i) {
    for (const Tensor& in : nodes[i].inputs) {
      const auto last = last_node_of_leaf.find(in.impl());
      if (last == last_node_of_leaf.end() || last->second != i) continue;
      final_after[i].push_back(in);
      last_node_of_leaf.erase(last);  // once, even if the node takes it twice
    }
  }
  return final_after;
}

// One node: its backward, if a gradient reached one of its outputs; then its outputs'
// gradients (unless retained) and what it saved are freed at once.
void run_node(Node& node) {
  bool reached = false;
  for (const Tensor& out : node.outputs) reached = reached || out.impl()->grad != nullptr;
  if (reached) {
    BackwardContext ctx(node);
    node.backward(ctx);
  }
  for (const Tensor& out : node.outputs) {
    if (!out.impl()->retains_grad) out.impl()->grad.reset();
  }
  node = Node{};
}

// After a failure at node `next`: the gradients of intermediates that never got to flow are
// dropped (the tape is cleared next); leaves may hold a partial sum (zero them before the next step).
void drop_pending_grads(std::vector<Node>& nodes, std::size_t next) {
  for (std::size_t i = 0; i <= next && i < nodes.size(); ++i) {
    for (const Tensor& out : nodes[i].outputs) {
      if (out.defined()) out.impl()->grad.reset();
    }
  }
}

}  // namespace

// The walk: the tape from the root's node down, each node's backward adding into its inputs'
// gradients; `on_leaf_final` is told of each leaf as soon as no node left can add to it.
void backward(const Tensor& root, const Tensor& seed, const LeafGradHook& on_leaf_final) {
  TensorImpl& r = checked_root(root, seed);
  if (r.creator == nullptr) {  // a leaf: its gradient is the seed itself
    add_into_grad(r, seed.clone());
    if (on_leaf_final) on_leaf_final(root);
    return;
  }
  Tape& t = tape();
  const std::size_t top = root_node(t, t.nodes_, root);
  std::size_t next = top + 1;  // nodes below `next` have not run yet
  try {
    const auto final_after = check_reachable(t.nodes_, top, &r, static_cast<bool>(on_leaf_final));
    add_into_grad(r, seed.clone());
    NoGradGuard no_grad;  // backward functions compute with ops but record nothing
    for (std::size_t i = top + 1; i-- > 0;) {
      next = i;
      run_node(t.nodes_[i]);
      if (on_leaf_final) {
        for (const Tensor& leaf : final_after[i]) on_leaf_final(leaf);
      }
    }
  } catch (...) {
    drop_pending_grads(t.nodes_, next);
    t.clear();
    throw;
  }
  r.consumed_by_backward = true;
  t.clear();
}

void record_named(const char* op, std::vector<Tensor> inputs, std::vector<Tensor> outputs,
                  std::vector<NamedSaved> saved, BackwardFn backward_fn) {
  std::vector<Tensor> tensors;
  for (NamedSaved& s : saved) tensors.push_back(std::move(s.tensor));
  record(op, std::move(inputs), std::move(outputs), std::move(tensors), std::move(backward_fn));
  Node& node = tape().nodes_.back();
  for (std::size_t j = 0; j < saved.size(); ++j) node.saved[j].name = saved[j].name;
}

}  // namespace qkgrad
