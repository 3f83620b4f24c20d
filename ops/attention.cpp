// The fused attention op: checks, the tape record, and the KV-cache path. The kernels are
// Backend::attention_forward / attention_backward (backends/cpu/cpu_attention.cpp); the math
// and its derivation are in docs/qknorm-attention.md.
#include "ops/attention.h"

#include <cmath>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

namespace {

AttentionSpec plan_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                             const AttentionOptions& o) {
  const char* op = "attention";
  check_same_dtype_device(op, q, k);
  check_same_dtype_device(op, q, v);
  QKGRAD_CHECK(q.rank() == 3 && k.rank() == 3 && v.rank() == 3, op,
               ": q, k and v must be [B, T, H·d], got q ", q.shape(), ", k ", k.shape(), ", v ", v.shape());
  QKGRAD_CHECK(k.shape() == v.shape(), op, ": k ", k.shape(), " and v ", v.shape(), " must have the same shape");
  QKGRAD_CHECK(q.size(0) == k.size(0) && q.size(2) == k.size(2), op, ": q ", q.shape(), " and k ",
               k.shape(), " must agree in batch size and width (H·d)");
  QKGRAD_CHECK(o.heads >= 1 && q.size(2) % o.heads == 0, op, ": the width ", q.size(2),
               " of q is not divisible into ", o.heads, " heads");
  QKGRAD_CHECK(o.dropout >= 0 && o.dropout < 1, op, ": dropout must be in [0, 1), got ", o.dropout);
  QKGRAD_CHECK(o.dropout == 0 || o.generator != nullptr, op,
               ": dropout > 0 needs a generator (AttentionOptions::generator) for its mask");
  QKGRAD_CHECK(o.eps > 0, op, ": eps must be > 0, got ", o.eps);
  QKGRAD_CHECK(o.kv_length >= -1 && o.kv_length <= k.size(1), op, ": kv_length ", o.kv_length,
               " must be -1 (all) or in [0, ", k.size(1), "] (the time steps of k)");
  const int64_t blas_limit = int64_t{1} << 31;
  QKGRAD_CHECK(q.size(1) < blas_limit && k.size(1) < blas_limit && q.size(2) < blas_limit, op,
               ": sizes beyond what BLAS can index (2^31): q ", q.shape(), ", k ", k.shape());
  AttentionSpec s;
  s.batch = q.size(0);
  s.heads = o.heads;
  s.tq = q.size(1);
  s.kv_time = k.size(1);
  s.tk = o.kv_length >= 0 ? o.kv_length : k.size(1);
  s.head_dim = q.size(2) / o.heads;
  // The kernels' logits: qknorm's, or scaled_dot's (also for q and k that rms_qknorm and
  // layer_qknorm have normalised: attention_of_normalised_heads).
  s.mode = o.mode == AttentionMode::qknorm ? AttentionMode::qknorm : AttentionMode::scaled_dot;
  s.scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(s.head_dim, 1)));
  s.eps = o.eps;
  s.causal = o.causal;
  s.query_offset = o.query_offset;
  if (s.qknorm()) {
    check_same_dtype_device(op, q, g);
    QKGRAD_CHECK((g.numel() == 1 && g.rank() <= 1) || g.shape() == Shape{o.heads}, op,
                 ": g must be a scalar ([] or [1]) or one value per head ([", o.heads, "]), got ", g.shape());
    s.per_head_g = g.rank() == 1 && g.numel() == o.heads && o.heads > 1;
  }
  if (!o.key_lengths.empty()) {
    QKGRAD_CHECK(static_cast<int64_t>(o.key_lengths.size()) == s.batch, op, ": ", o.key_lengths.size(),
                 " key lengths given for a batch of ", s.batch);
    for (std::size_t b = 0; b < o.key_lengths.size(); ++b) {
      QKGRAD_CHECK(o.key_lengths[b] >= 0 && o.key_lengths[b] <= s.tk, op, ": key length ",
                   o.key_lengths[b], " of batch entry ", b, " is outside [0, ", s.tk, "]");
    }
    s.key_lengths = o.key_lengths;
  }
  s.dropout = o.dropout;
  return s;
}

// rms_qknorm / layer_qknorm: a gain (and bias) must be [d] or [H, d], on q's dtype and device.
void check_norm_parameter(const char* what, const Tensor& p, const Tensor& q, const AttentionOptions& o, int64_t d) {
  const char* op = "attention";
  QKGRAD_CHECK(p.defined(), op, ": mode ", attention_mode_name(o.mode), " needs ", what,
               " (AttentionParams), [d] or [H, d]");
  check_same_dtype_device(op, q, p);
  const bool shared = p.shape() == Shape{d}, per_head = p.shape() == Shape{o.heads, d};
  QKGRAD_CHECK(shared || per_head, op, ": ", what, " must be [", d,
               "] (shared by the heads) or [", o.heads, ", ", d, "] (one per head), got ", p.shape());
}

// Each head's rows of x [B, T, H·d] normalised over their d values: RMSNorm or LayerNorm with
// the gain (and bias) shared by the heads ([d], the fused op's own γ and β) or one per head
// ([H, d], broadcast over [B, T, H, d] after a norm with unit gain).
Tensor normalize_heads(const Tensor& x, const Tensor& gain, const Tensor& bias, const AttentionOptions& o) {
  const int64_t B = x.size(0), T = x.size(1), H = o.heads, d = x.size(2) / H;
  const Tensor rows = x.reshape({B, T, H, d});  // [B, T, H, d]
  const bool shared = gain.rank() == 1;
  const Tensor one = shared ? gain : Tensor::ones({d}, x.dtype(), x.device());
  Tensor y;
  if (o.mode == AttentionMode::rms_qknorm) {
    y = rms_norm(rows, one, o.eps);
  } else {
    y = layer_norm(rows, one, shared ? bias : Tensor::zeros({d}, x.dtype(), x.device()), o.eps);
  }
  if (!shared) y = o.mode == AttentionMode::rms_qknorm ? y * gain : y * gain + bias;  // gain, bias [H, d]
  return y.reshape(x.shape());
}

// rms_qknorm and layer_qknorm: q̂ and k̂, then the scaled_dot kernel on them. Only the keys in
// use (kv_length) are normalised. No backward of its own: the tape runs the scaled_dot node's
// (below: q̂̄ = S̄ k̂ / √d, k̂̄ = S̄ᵀ q̂ / √d), then the norms' (docs/autodiff.md, Normalisation),
// which also give the gains and biases theirs (docs/qknorm-attention.md, "The QK-norm forms").
AttentionOutput attention_of_normalised_heads(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& p,
                                              const AttentionOptions& o) {
  plan_attention(q, k, v, Tensor(), o);  // the shapes and options, checked as for scaled_dot
  const int64_t d = q.size(2) / o.heads;
  check_norm_parameter("a query gain (q_gain)", p.q_gain, q, o, d);
  check_norm_parameter("a key gain (k_gain)", p.k_gain, q, o, d);
  if (o.mode == AttentionMode::layer_qknorm) {
    check_norm_parameter("a query bias (q_bias)", p.q_bias, q, o, d);
    check_norm_parameter("a key bias (k_bias)", p.k_bias, q, o, d);
    QKGRAD_CHECK(p.q_bias.shape() == p.q_gain.shape() && p.k_bias.shape() == p.k_gain.shape(),
                 "attention: each bias must have its gain's shape, got q_gain ", p.q_gain.shape(), " and q_bias ",
                 p.q_bias.shape(), ", k_gain ", p.k_gain.shape(), " and k_bias ", p.k_bias.shape());
  } else {
    QKGRAD_CHECK(!p.q_bias.defined() && !p.k_bias.defined(), "attention: rms_qknorm has no biases (q_bias, k_bias)");
  }
  AttentionOptions inner = o;
  inner.mode = AttentionMode::scaled_dot;
  inner.kv_length = -1;
  const bool part = o.kv_length >= 0 && o.kv_length < k.size(1);
  const Tensor k_used = part ? slice(k, 1, 0, o.kv_length) : k;  // [B, Tk, H·d]
  const Tensor v_used = part ? slice(v, 1, 0, o.kv_length) : v;
  return attention(normalize_heads(q, p.q_gain, p.q_bias, o), normalize_heads(k_used, p.k_gain, p.k_bias, o), v_used,
                   AttentionParams(), inner);
}

}  // namespace

const char* attention_mode_name(AttentionMode mode) {
  switch (mode) {
    case AttentionMode::qknorm: return "qknorm";
    case AttentionMode::scaled_dot: return "scaled_dot";
    case AttentionMode::rms_qknorm: return "rms_qknorm";
    case AttentionMode::layer_qknorm: return "layer_qknorm";
  }
  return "?";
}

std::vector<std::string> attention_mode_names() {
  std::vector<std::string> names;
  for (AttentionMode m : kAttentionModes) names.emplace_back(attention_mode_name(m));
  return names;
}

std::string attention_mode_choices() {
  const std::vector<std::string> names = attention_mode_names();
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) text += cat(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ", names[i]);
  return text;
}

AttentionMode attention_mode_from_name(const std::string& name) {
  for (AttentionMode m : kAttentionModes) {
    if (name == attention_mode_name(m)) return m;
  }
  fail(cat("unknown attention mode \"", name, "\" (choose ", attention_mode_choices(), ")"));
}

bool normalises_heads(AttentionMode mode) { return mode == AttentionMode::rms_qknorm || mode == AttentionMode::layer_qknorm; }

AttentionOutput attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                          const AttentionOptions& o) {
  if (normalises_heads(o.mode)) return attention_of_normalised_heads(q, k, v, params, o);
  const Tensor& g = params.g;
  AttentionSpec s = plan_attention(q, k, v, g, o);
  if (s.dropout > 0) {  // one stream word per element of P [B, H, Tq, Tk]
    Generator& gen = *o.generator;
    s.rs = RandomStream{gen.seed(), gen.stream(),
                        gen.reserve_blocks(static_cast<uint64_t>((s.batch * s.heads * s.tq * s.tk + 3) / 4))};
  }
  Backend& be = backend(q.device());
  // What the backward reads back, named; the backend chooses which (the CPU keeps P, the
  // CUDA kernels lse, from which they recompute P).
  AttentionState state = be.attention_state(s, q.dtype(), o.return_probs);
  Tensor out = Tensor::empty(q.shape(), q.dtype(), q.device());  // [B, Tq, H·d]
  be.attention_forward(s, q, k, v, s.qknorm() ? &g : nullptr, out, state);

  // The backward (docs/qknorm-attention.md, (7)-(15)), per head, P' the dropped-out P:
  //   v̄ = P'ᵀ Ō,   P̄ = dropout(Ō vᵀ),   S̄ = P ⊙ (P̄ − D),   Dᵢ = Ōᵢ·Oᵢ   (why O is saved)
  //   qknorm:      q̂̄ = g S̄ k̂,  k̂̄ = g S̄ᵀ q̂,  ḡ = Σᵢ q̂ᵢ·(S̄ k̂)ᵢ,
  //                q̄ᵢ = (q̂̄ᵢ − q̂ᵢ (q̂ᵢ·q̂̄ᵢ)) / ‖qᵢ‖   (k̄ alike: each row's gradient ⟂ the row)
  //   scaled_dot:  q̄ = S̄ k / √d,  k̄ = S̄ᵀ q / √d
  const bool g_learns = s.qknorm() && g.requires_grad();
  if (should_record(q, k, v) || (g_learns && grad_enabled())) {
    std::vector<Tensor> inputs = {q, k, v};
    if (s.qknorm()) inputs.push_back(g);
    record_named("attention", inputs, {out},
                 {{"q", q}, {"k", k}, {"v", v}, {"g", s.qknorm() ? g : Tensor()}, {"out", out},
                  {"probs", state.probs}, {"lse", state.lse}, {"rq", state.rq}, {"rk", state.rk}},
                 [s](BackwardContext& ctx) {
                   const Tensor& q = ctx.saved("q");
                   const Tensor& k = ctx.saved("k");
                   const Tensor& v = ctx.saved("v");
                   const Tensor* g = s.qknorm() ? &ctx.saved("g") : nullptr;
                   const AttentionState kept{ctx.saved("probs"), ctx.saved("lse"), ctx.saved("rq"), ctx.saved("rk")};
                   AttentionGrads grads{Tensor::empty(q.shape(), q.dtype(), q.device()),
                                        Tensor::empty(k.shape(), k.dtype(), k.device()),
                                        Tensor::empty(v.shape(), v.dtype(), v.device()), Tensor()};
                   if (s.qknorm() && ctx.needs_grad(3)) grads.dg = Tensor::empty(g->shape(), g->dtype(), g->device());
                   backend(q.device()).attention_backward(s, q, k, v, g, ctx.saved("out"), kept, ctx.grad_output(), grads);
                   ctx.accumulate(0, std::move(grads.dq));
                   ctx.accumulate(1, std::move(grads.dk));
                   ctx.accumulate(2, std::move(grads.dv));
                   if (grads.dg.defined()) ctx.accumulate(3, std::move(grads.dg));
                 });
  }
  // The probabilities users see are a detached handle on P (no copy, no gradient).
  return {out, o.return_probs ? state.probs.detach() : Tensor()};
}

double qknorm_initial_g(double length) {
  QKGRAD_CHECK(length > 1, "qknorm_initial_g: the length L must be > 1 (g₀ = log2(L² − L)), got ", length);
  return std::log2(length * length - length);
}

AttentionOutput attention_step(const Tensor& q, const Tensor& keys, const Tensor& values, int64_t length,
                               const AttentionParams& params, AttentionOptions o) {
  QKGRAD_CHECK(length >= 0 && length <= keys.size(1), "attention_step: length ", length, " is outside the ",
               keys.size(1), " cached rows");
  QKGRAD_CHECK(q.rank() == 3 && q.size(1) <= length, "attention_step: q ", q.shape(), " has more steps than the ",
               length, " in the cache (append their keys first)");
  o.kv_length = length;
  if (o.causal) o.query_offset = length - q.size(1);
  return attention(q, keys, values, params, o);
}

}  // namespace qkgrad
