#include "nn/multihead_attention.h"

#include <cmath>

#include "core/autograd.h"
#include "core/error.h"
#include "ops/ops.h"

namespace qkgrad {

namespace {
double projection_std(int64_t dim) { return std::sqrt(2.0 / (5.0 * static_cast<double>(dim))); }
}  // namespace

MultiHeadAttention::MultiHeadAttention(const AttentionConfig& c, const InitContext& init)
    : config(c),
      q_proj(c.dim, c.dim, c.bias, projection_std(c.dim), init),
      k_proj(c.dim, c.dim, c.bias, projection_std(c.dim), init),
      v_proj(c.dim, c.dim, c.bias, projection_std(c.dim), init),
      out_proj(c.dim, c.dim, c.bias, projection_std(c.dim), init) {
  QKGRAD_CHECK(c.heads >= 1 && c.dim % c.heads == 0, "MultiHeadAttention: dim ", c.dim,
               " is not divisible into ", c.heads, " heads");
  register_module("q_proj", q_proj);
  register_module("k_proj", k_proj);
  register_module("v_proj", v_proj);
  register_module("out_proj", out_proj);
  if (c.mode == AttentionMode::qknorm) {
    const double g0 = qknorm_initial_g(c.qknorm_length);
    g = c.per_head_g ? init.full({c.heads}, g0) : init.full({}, g0);
    register_parameter("g", g);
  }
  if (normalises_heads(c.mode)) {
    QKGRAD_CHECK(!c.norm_whole_projection || (c.norm_before_rope && !c.per_head_g), "MultiHeadAttention: a norm over ",
                 "the whole projection (OLMo 2) comes before the rotation and has one gain a dimension, not one a head");
    const int64_t d = c.dim / c.heads;
    const Shape shape = c.norm_whole_projection ? Shape{c.dim} : c.per_head_g ? Shape{c.heads, d} : Shape{d};
    const double gain0 = c.gain_one_plus_w ? 0.0 : 1.0;  // the gain starts at 1 either way
    q_gain = init.full(shape, gain0);
    k_gain = init.full(shape, gain0);
    register_parameter("q_norm.gamma", q_gain);
    register_parameter("k_norm.gamma", k_gain);
    if (c.mode == AttentionMode::layer_qknorm) {
      q_bias = init.full(shape, 0.0);
      k_bias = init.full(shape, 0.0);
      register_parameter("q_norm.beta", q_bias);
      register_parameter("k_norm.beta", k_bias);
    }
  }
}

Tensor MultiHeadAttention::effective_gain(const Tensor& gain) const {
  return config.gain_one_plus_w && gain.defined() ? gain + 1.0 : gain;
}

AttentionParams MultiHeadAttention::params() const {
  if (normalises_before_op()) return AttentionParams();
  AttentionParams p(g);
  p.q_gain = effective_gain(q_gain);
  p.k_gain = effective_gain(k_gain);
  p.q_bias = q_bias;
  p.k_bias = k_bias;
  return p;
}

// norm_before_rope: RMSNorm or LayerNorm (eps 1e-6, as the fused op's) of each head of
// x [B, T, H·d], or of all H·d at once (norm_whole_projection), times the gain [d], [H, d] or [H·d].
Tensor MultiHeadAttention::normalise(const Tensor& x, const Tensor& gain, const Tensor& bias) const {
  const int64_t B = x.size(0), T = x.size(1), H = config.heads, D = x.size(2);
  const Tensor rows = config.norm_whole_projection ? x : x.reshape({B, T, H, D / H});  // [B, T, D] or [B, T, H, d]
  const int64_t n = rows.size(-1);
  const Tensor ones = Tensor::ones({n}, x.dtype(), x.device()), zeros = Tensor::zeros({n}, x.dtype(), x.device());
  const Tensor normed = config.mode == AttentionMode::rms_qknorm ? rms_norm(rows, ones, 1e-6) : layer_norm(rows, ones, zeros, 1e-6);
  Tensor y = normed * effective_gain(gain);  // [d] or [H·d] per row; [H, d] per head
  if (bias.defined()) y = y + bias;
  return y.reshape({B, T, D});
}

Tensor MultiHeadAttention::prepare(const Tensor& x, const Tensor& gain, const Tensor& bias, int64_t position) const {
  const Tensor normed = normalises_before_op() ? normalise(x, gain, bias) : x;
  return config.rope_base > 0 ? rope(normed, config.heads, position, config.rope_base) : normed;
}

AttentionOptions MultiHeadAttention::options(const std::vector<int64_t>& key_lengths, bool causal,
                                             Generator& gen) const {
  AttentionOptions o;
  o.heads = config.heads;
  o.mode = normalises_before_op() ? AttentionMode::scaled_dot : config.mode;  // q and k come normalised
  o.key_lengths = key_lengths;
  o.causal = causal;
  o.dropout = training() ? config.dropout : 0.0;
  o.generator = &gen;
  o.return_probs = record_probs;
  return o;
}

Tensor MultiHeadAttention::forward(const Tensor& x_q, const Tensor& x_kv,
                                   const std::vector<int64_t>& key_lengths, bool causal,
                                   Generator& gen) const {
  // Self-attention with rotary positions: query and key t are both at position t.
  QKGRAD_CHECK(config.rope_base == 0 || x_q.impl() == x_kv.impl(),
               "MultiHeadAttention: rotary positions need self-attention (x_q is x_kv)");
  const Tensor q = prepare(q_proj.forward(x_q), q_gain, q_bias, 0);    // [B, Tq, D]
  const Tensor k = prepare(k_proj.forward(x_kv), k_gain, k_bias, 0);   // [B, Tk, D]
  const Tensor v = v_proj.forward(x_kv);                               // [B, Tk, D]
  const AttentionOutput a = attention(q, k, v, params(), options(key_lengths, causal, gen));
  if (record_probs) last_probs = a.probs;
  if (record_logits) {
    NoGradGuard no_grad;
    last_logits = attention_logits(q, k, params(), options(key_lengths, causal, gen));
  }
  return out_proj.forward(a.out);
}

Tensor MultiHeadAttention::forward_step(const Tensor& x_step, KVCache& cache, Generator& gen) const {
  const int64_t first = cache.length();  // the position of x_step's first token
  const Tensor k = prepare(k_proj.forward(x_step), k_gain, k_bias, first);  // [B, t, D]
  const Tensor q = prepare(q_proj.forward(x_step), q_gain, q_bias, first);  // [B, t, D]
  cache.append(k, v_proj.forward(x_step));
  return out_proj.forward(attention_step(q, cache, params(), options({}, true, gen)).out);
}

MultiHeadAttention::Memory MultiHeadAttention::project_memory(const Tensor& memory,
                                                              const std::vector<int64_t>& key_lengths) const {
  const Tensor k = k_proj.forward(memory);  // [B, S, D]
  return {normalises_before_op() ? normalise(k, k_gain, k_bias) : k, v_proj.forward(memory), key_lengths};
}

Tensor MultiHeadAttention::forward_memory(const Tensor& x_q, const Memory& m, Generator& gen) const {
  const Tensor q_raw = q_proj.forward(x_q);  // [B, T, D]
  const Tensor q = normalises_before_op() ? normalise(q_raw, q_gain, q_bias) : q_raw;
  const AttentionOutput a = attention(q, m.k, m.v, params(), options(m.key_lengths, false, gen));
  if (record_probs) last_probs = a.probs;
  return out_proj.forward(a.out);
}

}  // namespace qkgrad
