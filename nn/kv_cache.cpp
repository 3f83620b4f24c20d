#include "nn/kv_cache.h"

#include <algorithm>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

namespace {
constexpr int64_t kFirstSteps = 16;  // the storage's first size, in steps
}  // namespace

KVCache::KVCache(int64_t batch, int64_t capacity, int64_t width, DType dtype, Device device)
    : keys_(Tensor::zeros({batch, std::min(capacity, kFirstSteps), width}, dtype, device)),
      values_(Tensor::zeros({batch, std::min(capacity, kFirstSteps), width}, dtype, device)),
      capacity_(capacity) {}

void KVCache::append(const Tensor& k_step, const Tensor& v_step) {
  check_same_dtype_device("KVCache::append", keys_, k_step);
  check_same_dtype_device("KVCache::append", keys_, v_step);
  const int64_t batch = keys_.size(0), width = keys_.size(2);
  QKGRAD_CHECK(k_step.rank() == 3 && k_step.shape() == v_step.shape() && k_step.size(0) == batch &&
                   k_step.size(2) == width,
               "KVCache::append: k ", k_step.shape(), " and v ", v_step.shape(), " must both be [", batch,
               ", t, ", width, "]");
  const int64_t t = k_step.size(1);
  QKGRAD_CHECK(length_ + t <= capacity_, "KVCache::append: ", length_, " cached + ", t,
               " new steps exceed the capacity of ", capacity_);
  grow(length_ + t);
  const int64_t allocated = keys_.size(1);
  Backend& be = backend(keys_.device());
  be.copy_block(k_step, t, 0, keys_, allocated, length_, batch, t, width, false);
  be.copy_block(v_step, t, 0, values_, allocated, length_, batch, t, width, false);
  keys_.mark_written();
  values_.mark_written();
  length_ += t;
}

// Doubling, up to the capacity: a decode of n steps copies O(n) steps in all for it, and holds
// memory for the steps it reaches, not for the longest it might.
void KVCache::grow(int64_t steps) {
  const int64_t allocated = keys_.size(1);
  if (steps <= allocated) return;
  const int64_t batch = keys_.size(0), width = keys_.size(2);
  const int64_t larger = std::min(capacity_, std::max(steps, 2 * allocated));
  Backend& be = backend(keys_.device());
  for (Tensor* cache : {&keys_, &values_}) {
    Tensor bigger = Tensor::empty({batch, larger, width}, cache->dtype(), cache->device());  // [B, larger, width]
    be.copy_block(*cache, allocated, 0, bigger, larger, 0, batch, length_, width, false);
    *cache = bigger;
  }
}

// Copies only the length() steps in use of each kept row (a beam search reorders at every step:
// copying the whole capacity made the copies most of a decode's time). The new rows' unused steps
// are left unset: attention_step reads only the first length() of them.
void KVCache::select_rows(const Tensor& rows) {
  check_index_tensor("KVCache::select_rows", rows, "rows");
  QKGRAD_CHECK(rows.rank() == 1 && rows.device() == keys_.device(), "KVCache::select_rows: rows must be 1-D on ",
               device_name(keys_.device()), ", got ", rows.shape(), " on ", device_name(rows.device()));
  check_ids_in_range("KVCache::select_rows", rows, keys_.size(0), "row",
                     cat("the cache holds ", keys_.size(0), " batch entries"));
  const int64_t used = length_ * keys_.size(2);  // elements in use per batch entry
  Backend& be = backend(keys_.device());
  for (Tensor* cache : {&keys_, &values_}) {
    Tensor kept = Tensor::empty({rows.numel(), keys_.size(1), keys_.size(2)}, keys_.dtype(), keys_.device());  // [B', allocated, width]
    be.index_select_prefix(*cache, rows, used, kept);
    *cache = kept;
  }
}

}  // namespace qkgrad
