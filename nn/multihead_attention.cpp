#include "nn/multihead_attention.h"

#include <cmath>

#include "core/error.h"
#include "ops/ops.h"

namespace qkgrad {

namespace {
double projection_std(int64_t dim) { return std::sqrt(2.0 / (5.0 * static_cast<double>(dim))); }
}  // namespace

MultiHeadAttention::MultiHeadAttention(const AttentionConfig& c, const InitContext& init)
    : config(c),
      q_proj(c.dim, c.dim, true, projection_std(c.dim), init),
      k_proj(c.dim, c.dim, true, projection_std(c.dim), init),
      v_proj(c.dim, c.dim, true, projection_std(c.dim), init),
      out_proj(c.dim, c.dim, true, projection_std(c.dim), init) {
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
    const int64_t d = c.dim / c.heads;
    const Shape shape = c.per_head_g ? Shape{c.heads, d} : Shape{d};
    q_gain = init.full(shape, 1.0);
    k_gain = init.full(shape, 1.0);
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

AttentionParams MultiHeadAttention::params() const {
  AttentionParams p(g);
  p.q_gain = q_gain;
  p.k_gain = k_gain;
  p.q_bias = q_bias;
  p.k_bias = k_bias;
  return p;
}

AttentionOptions MultiHeadAttention::options(const std::vector<int64_t>& key_lengths, bool causal,
                                             Generator& gen) const {
  AttentionOptions o;
  o.heads = config.heads;
  o.mode = config.mode;
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
  Tensor q = q_proj.forward(x_q);   // [B, Tq, D]
  Tensor k = k_proj.forward(x_kv);  // [B, Tk, D]
  const Tensor v = v_proj.forward(x_kv);  // [B, Tk, D]
  if (config.rope_base > 0) {  // self-attention: query and key t are both at position t
    QKGRAD_CHECK(x_q.impl() == x_kv.impl(), "MultiHeadAttention: rotary positions need self-attention (x_q is x_kv)");
    q = rope(q, config.heads, 0, config.rope_base);
    k = rope(k, config.heads, 0, config.rope_base);
  }
  const AttentionOutput a = attention(q, k, v, params(), options(key_lengths, causal, gen));
  if (record_probs) last_probs = a.probs;
  return out_proj.forward(a.out);
}

Tensor MultiHeadAttention::forward_step(const Tensor& x_step, KVCache& cache, Generator& gen) const {
  const int64_t first = cache.length();  // the position of x_step's first token
  Tensor k = k_proj.forward(x_step), q = q_proj.forward(x_step);  // [B, t, D]
  if (config.rope_base > 0) {
    k = rope(k, config.heads, first, config.rope_base);
    q = rope(q, config.heads, first, config.rope_base);
  }
  cache.append(k, v_proj.forward(x_step));
  return out_proj.forward(attention_step(q, cache, params(), options({}, true, gen)).out);
}

MultiHeadAttention::Memory MultiHeadAttention::project_memory(const Tensor& memory,
                                                              const std::vector<int64_t>& key_lengths) const {
  return {k_proj.forward(memory), v_proj.forward(memory), key_lengths};
}

Tensor MultiHeadAttention::forward_memory(const Tensor& x_q, const Memory& m, Generator& gen) const {
  const Tensor q = q_proj.forward(x_q);
  const AttentionOutput a = attention(q, m.k, m.v, params(), options(m.key_lengths, false, gen));
  if (record_probs) last_probs = a.probs;
  return out_proj.forward(a.out);
}

}  // namespace qkgrad
