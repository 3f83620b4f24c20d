// Keys and values of the steps decoded so far, for incremental (one step at a time) decoding:
// the decoder's self-attention appends each step's keys and values, and attends over them with
// ops' attention_step; beam search reorders the cache's rows with its hypotheses.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/attention.h"

namespace qkgrad {

class KVCache {
 public:
  // capacity: the most steps it may hold. The storage grows (doubling) as steps are appended.
  KVCache(int64_t batch, int64_t capacity, int64_t width, DType dtype = DType::f32,
          Device device = Device::cpu);
  // Appends k_step, v_step ([B, t, width]) after the cached steps. No gradient flows into the
  // cache (use it under NoGradGuard, at inference).
  void append(const Tensor& k_step, const Tensor& v_step);
  // Keeps batch entries rows[0], rows[1], ... (i64, may repeat): beam search reorders its
  // hypotheses this way. The batch size becomes rows.numel().
  void select_rows(const Tensor& rows);
  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  const Tensor& keys() const { return keys_; }      // [B, allocated, width]; first length() used
  const Tensor& values() const { return values_; }

 private:
  void grow(int64_t steps);  // storage for at least `steps` steps
  Tensor keys_, values_;
  int64_t length_ = 0, capacity_ = 0;
};

// attention_step (ops/attention.h) over everything in `cache`.
inline AttentionOutput attention_step(const Tensor& q, const KVCache& cache, const AttentionParams& params,
                                      AttentionOptions options) {
  return attention_step(q, cache.keys(), cache.values(), cache.length(), params, options);
}

}  // namespace qkgrad
