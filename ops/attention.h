// Multi-head attention as one fused op: QKNorm (Henry et al. 2020) and scaled dot-product.
//
//   q: [B, Tq, H·d], k and v: [B, Tk, H·d]  ->  out: [B, Tq, H·d]
//   per batch entry b and head h (head h = columns [h·d, (h+1)·d)):
//     qknorm:      S = g · q̂ k̂ᵀ + M,  q̂ = q / max(‖q‖, eps) row-wise (same for k)
//     scaled_dot:  S = q kᵀ / √d + M
//     P = softmax(S) row-wise,  P' = dropout(P),  out = P' v
// M is 0 or −∞ from key padding (key_lengths) and the causal mask. Every logit of QKNorm lies
// in [−g, g]. The derivation of the backward is docs/qknorm-attention.md; the same function
// composed from primitive ops is attention_reference below.
#pragma once

#include <cstdint>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace qkgrad {

enum class AttentionMode { qknorm, scaled_dot };

struct AttentionOptions {
  int64_t heads = 1;
  AttentionMode mode = AttentionMode::qknorm;
  std::vector<int64_t> key_lengths;  // per batch entry: keys at positions >= length are padding
  bool causal = false;               // query i sees key j only if j <= i + query_offset
  int64_t query_offset = 0;          // position of the first query (incremental decoding)
  double dropout = 0.0;              // on the attention probabilities
  Generator* generator = nullptr;    // the dropout stream; required when dropout > 0
  double eps = 1e-6;                 // qknorm: norms are clamped below at eps
  bool return_probs = false;         // also return P [B, H, Tq, Tk] (before dropout; no grad)
  int64_t kv_length = -1;            // use only the first kv_length steps of k and v (-1: all)
};

struct AttentionOutput {
  Tensor out;    // [B, Tq, H·d]
  Tensor probs;  // [B, H, Tq, Tk] when return_probs, else undefined
};

// g: qknorm's learnable gain, [] or [1] (one per attention module, as in the paper) or [H] (one
// per head); ignored (may be undefined) for scaled_dot.
AttentionOutput attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                          const AttentionOptions& options);

// The same function built from primitive ops (l2_normalize, matmul, masked_fill, softmax,
// dropout): slower and hungrier, but easy to read. Tests and the benchmark compare against it.
AttentionOutput attention_reference(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& g, const AttentionOptions& options);

// The paper's initial gain: g₀ = log2(L² − L), L = the 97.5th percentile of training sequence
// lengths (in subword tokens). For L = 72, g₀ ≈ 12.3.
double qknorm_initial_g(double length);

// Keys and values of the steps decoded so far, for incremental (one step at a time) decoding.
class KVCache {
 public:
  KVCache(int64_t batch, int64_t capacity, int64_t width, DType dtype = DType::f32,
          Device device = Device::cpu);
  // Appends k_step, v_step ([B, t, width]) after the cached steps. No gradient flows into the
  // cache (use it under NoGradGuard, at inference).
  void append(const Tensor& k_step, const Tensor& v_step);
  // Keeps batch entries rows[0], rows[1], ... (i64, may repeat): beam search reorders its
  // hypotheses this way. The batch size becomes rows.numel().
  void select_rows(const Tensor& rows);
  int64_t length() const { return length_; }
  int64_t capacity() const { return keys_.size(1); }
  const Tensor& keys() const { return keys_; }      // [B, capacity, width]; first length() used
  const Tensor& values() const { return values_; }

 private:
  Tensor keys_, values_;
  int64_t length_ = 0;
};

// Attention of the newest query steps q [B, t, H·d] over everything in the cache (which must
// already hold their keys and values): equal to the last t rows of the full causal computation.
AttentionOutput attention_step(const Tensor& q, const KVCache& cache, const Tensor& g,
                               AttentionOptions options);

}  // namespace qkgrad
