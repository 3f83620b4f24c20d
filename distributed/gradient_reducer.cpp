#include "distributed/gradient_reducer.h"

#include <chrono>

#include "core/backend.h"
#include "core/error.h"

namespace qkgrad::distributed {

GradientReducer::GradientReducer(Communicator& comm, std::vector<Tensor> params, std::size_t bucket_bytes)
    : comm_(comm), params_(std::move(params)), bucket_of_(params_.size()), final_(params_.size(), false) {
  QKGRAD_CHECK(!params_.empty(), "GradientReducer: no parameters");
  for (std::size_t i = params_.size(); i-- > 0;) {  // reverse order: the last layers finish first
    const Tensor& p = params_[i];
    QKGRAD_CHECK(p.dtype() == params_[0].dtype() && p.device() == params_[0].device(),
                 "GradientReducer: parameter ", i, " is ", describe(p), " but parameter 0 is ", describe(params_[0]),
                 "; every parameter must have the same dtype and device");
    if (buckets_.empty() || buckets_.back().numel * static_cast<int64_t>(dtype_size(p.dtype())) >= static_cast<int64_t>(bucket_bytes)) {
      buckets_.emplace_back();
    }
    buckets_.back().params.push_back(i);
    buckets_.back().numel += p.numel();
    index_of_[p.impl()] = i;
    bucket_of_[i] = buckets_.size() - 1;
  }
  for (Bucket& b : buckets_) b.flat = Tensor::zeros({b.numel}, params_[0].dtype(), params_[0].device());
}

LeafGradHook GradientReducer::hook() {
  return [this](const Tensor& leaf) { mark_final(leaf); };
}

void GradientReducer::mark_final(const Tensor& leaf) {
  const auto found = index_of_.find(leaf.impl());
  if (found == index_of_.end() || final_[found->second]) return;  // not a parameter, or already counted
  final_[found->second] = true;
  ++buckets_[bucket_of_[found->second]].final_count;
  start_ready_buckets(false);
}

// Starts buckets in order while the next one is complete (or, at the end, all of them); polls
// the started ones, so that MPI moves them on while backward computes.
void GradientReducer::start_ready_buckets(bool everything) {
  while (next_to_start_ < buckets_.size()) {
    Bucket& b = buckets_[next_to_start_];
    if (!everything && b.final_count < b.params.size()) break;
    pack(b);
    b.pending = comm_.start_sum(b.flat);
    ++next_to_start_;
  }
  for (std::size_t i = 0; i < next_to_start_; ++i) {
    if (buckets_[i].pending) buckets_[i].pending->poll();
  }
}

void GradientReducer::finish() {
  const auto start = std::chrono::steady_clock::now();
  start_ready_buckets(true);
  for (Bucket& b : buckets_) {
    b.pending->wait();
    b.pending.reset();
    unpack(b);
    b.final_count = 0;
  }
  std::fill(final_.begin(), final_.end(), false);
  next_to_start_ = 0;
  last_wait_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// flat[offset : offset + numel(p)] = grad(p), for each parameter of the bucket (zeros for a
// gradient no backward reached on this rank: grad_buffer allocates them).
void GradientReducer::pack(Bucket& b) {
  int64_t offset = 0;
  for (std::size_t i : b.params) {
    const Tensor g = grad_buffer(params_[i]);
    backend(b.flat.device()).copy_block(g, g.numel(), 0, b.flat, b.numel, offset, 1, g.numel(), 1, false);
    offset += g.numel();
  }
  b.flat.mark_written();
}

void GradientReducer::unpack(Bucket& b) {
  int64_t offset = 0;
  for (std::size_t i : b.params) {
    Tensor g = grad_buffer(params_[i]);
    backend(g.device()).copy_block(b.flat, b.numel, offset, g, g.numel(), 0, 1, g.numel(), 1, false);
    g.mark_written();
    offset += g.numel();
  }
}

}  // namespace qkgrad::distributed
