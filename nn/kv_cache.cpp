#include "nn/kv_cache.h"

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

KVCache::KVCache(int64_t batch, int64_t capacity, int64_t width, DType dtype, Device device)
    : keys_(Tensor::zeros({batch, capacity, width}, dtype, device)),
      values_(Tensor::zeros({batch, capacity, width}, dtype, device)) {}

void KVCache::append(const Tensor& k_step, const Tensor& v_step) {
  check_same_dtype_device("KVCache::append", keys_, k_step);
  check_same_dtype_device("KVCache::append", keys_, v_step);
  const int64_t batch = keys_.size(0), width = keys_.size(2);
  QKGRAD_CHECK(k_step.rank() == 3 && k_step.shape() == v_step.shape() && k_step.size(0) == batch &&
                   k_step.size(2) == width,
               "KVCache::append: k ", k_step.shape(), " and v ", v_step.shape(), " must both be [", batch,
               ", t, ", width, "]");
  const int64_t t = k_step.size(1);
  QKGRAD_CHECK(length_ + t <= capacity(), "KVCache::append: ", length_, " cached + ", t,
               " new steps exceed the capacity of ", capacity());
  Backend& be = backend(keys_.device());
  be.copy_block(k_step, t, 0, keys_, capacity(), length_, batch, t, width, false);
  be.copy_block(v_step, t, 0, values_, capacity(), length_, batch, t, width, false);
  keys_.mark_written();
  values_.mark_written();
  length_ += t;
}

void KVCache::select_rows(const Tensor& rows) {
  NoGradGuard no_grad;
  keys_ = index_select(keys_, 0, rows);
  values_ = index_select(values_, 0, rows);
}

}  // namespace qkgrad
