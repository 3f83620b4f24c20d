// Multi-head attention: four projections around the fused attention op (ops/attention.h).
//
//   q = x_q W_qᵀ + b_q,  k = x_kv W_kᵀ + b_k,  v = x_kv W_vᵀ + b_v      [B, T, D]
//   q, k = rope(q), rope(k)    (with rope_base > 0: rotary positions, before the attention's norms)
//   o = attention(q, k, v, g)  (QKNorm or scaled dot-product, heads split inside the kernel)
//   y = o W_oᵀ + b_o
// Projections are N(0, 2/(5D)) with zero biases (the paper's initialisation). For QKNorm the
// module owns the learnable gain g, initialised to log2(L² − L) from the length statistic L;
// for rms_qknorm and layer_qknorm the gains (1) and biases (0) of its query and key norms.
#pragma once

#include <vector>

#include "nn/kv_cache.h"
#include "nn/layers.h"
#include "ops/attention.h"

namespace qkgrad {

struct AttentionConfig {
  int64_t dim = 512;
  int64_t heads = 8;
  AttentionMode mode = AttentionMode::qknorm;
  double qknorm_length = 72;  // L: g₀ = log2(L² − L)
  bool per_head_g = false;    // one g per head instead of one per module (not in the paper); for
                              // rms_qknorm / layer_qknorm: gains (and biases) [H, d] instead of [d]
  double dropout = 0.0;       // on the attention probabilities
  double rope_base = 0;       // > 0: rotary positions on q and k (self-attention; ops/rope.cpp) with this base
  // rms_qknorm / layer_qknorm only: where and how q and k are normalised.
  //   norm_before_rope off: the fused attention op normalises each head, after the rotation.
  //   norm_before_rope on: this module normalises q and k (the rms_norm / layer_norm ops), then
  //     rotates them, then runs scaled dot-product attention: Qwen 3's and Gemma 3's order;
  //   norm_whole_projection (with norm_before_rope): one norm over all H·d of q (and of k)
  //     before the split into heads, gains [H·d]: OLMo 2;
  //   gain_one_plus_w: each gain is 1 + w, w initialised to 0 (Gemma 3's parametrisation: the
  //     same function; weight decay on w would pull the gain towards 1 instead of 0, but
  //     qkgrad-lm's AdamW leaves the norms' gains undecayed, and Adam's step does not depend on
  //     the parameter's value, so there the two forms train alike).
  bool norm_before_rope = false, norm_whole_projection = false, gain_one_plus_w = false;
  bool bias = true;  // biases in the four projections
};

class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(const AttentionConfig& config, const InitContext& init);

  // x_q [B, Tq, D] attends to x_kv [B, Tk, D]; keys at positions >= key_lengths[b] are padding.
  Tensor forward(const Tensor& x_q, const Tensor& x_kv, const std::vector<int64_t>& key_lengths,
                 bool causal, Generator& gen) const;

  // Incremental self-attention: appends the keys/values of x_step [B, t, D] to `cache` and
  // attends causally over everything cached so far.
  Tensor forward_step(const Tensor& x_step, KVCache& cache, Generator& gen) const;

  // Cross-attention against keys/values computed once (project_memory) from the encoder output.
  struct Memory {
    Tensor k, v;                       // [B, S, D]
    std::vector<int64_t> key_lengths;  // source lengths
  };
  Memory project_memory(const Tensor& memory, const std::vector<int64_t>& key_lengths) const;
  Tensor forward_memory(const Tensor& x_q, const Memory& memory, Generator& gen) const;

  // The options of the attention op for this module (dropout only in training mode).
  AttentionOptions options(const std::vector<int64_t>& key_lengths, bool causal, Generator& gen) const;

  // For visualisation: when record_probs is on, every forward keeps its attention
  // probabilities [B, H, Tq, Tk] in last_probs; when record_logits is on, its logits
  // [B, H, Tq, Tk] (masked entries −∞; computed once more, composed: attention_logits) in
  // last_logits. Neither has a gradient.
  bool record_probs = false, record_logits = false;
  mutable Tensor last_probs, last_logits;

  // The attention op's parameters of this module's mode (none when this module normalises q and
  // k itself: norm_before_rope).
  AttentionParams params() const;
  bool normalises_before_op() const { return config.norm_before_rope && normalises_heads(config.mode); }

  AttentionConfig config;
  Linear q_proj, k_proj, v_proj, out_proj;
  Tensor g;  // [] (or [H] with per_head_g); QKNorm only
  // rms_qknorm and layer_qknorm: the query and key norms' gains, initialised to 1, and (layer
  // only) biases, initialised to 0; each [d] (or [H, d] with per_head_g). Checkpoint names:
  // q_norm.gamma, k_norm.gamma, q_norm.beta, k_norm.beta.
  Tensor q_gain, k_gain, q_bias, k_bias;

 private:
  // q and k [B, T, H·d] rotated and (norm_before_rope) normalised first; the first at `position`.
  Tensor prepare(const Tensor& x, const Tensor& gain, const Tensor& bias, int64_t position) const;
  Tensor normalise(const Tensor& x, const Tensor& gain, const Tensor& bias) const;  // norm_before_rope
  Tensor effective_gain(const Tensor& gain) const;  // γ, or 1 + w
};

}  // namespace qkgrad
