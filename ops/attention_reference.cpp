// Attention composed from primitive ops: the readable reference the fused op is tested against.
// Each line is one step of the math in ops/attention.h.
#include <cmath>

#include "core/error.h"
#include "ops/attention.h"
#include "ops/ops.h"

namespace qkgrad {

namespace {
// rms_qknorm / layer_qknorm on heads [B, H, T, d] from primitives: x / √(mean(x²) + eps) · γ, or
// (x − mean) / √(var + eps) · γ + β; γ and β are [d] or [H, d] (then [H, 1, d] against the rows).
Tensor normalise(const Tensor& x, const Tensor& gain, const Tensor& bias, const AttentionOptions& o) {
  auto per_head = [&](const Tensor& p) { return p.rank() == 2 ? p.reshape({p.size(0), 1, p.size(1)}) : p; };
  if (o.mode == AttentionMode::rms_qknorm) return x * rsqrt(mean(square(x), -1, true) + o.eps) * per_head(gain);
  const Tensor centered = x - mean(x, -1, true);
  return centered * rsqrt(mean(square(centered), -1, true) + o.eps) * per_head(gain) + per_head(bias);
}
}  // namespace

Tensor attention_logits(const Tensor& q, const Tensor& k_all, const AttentionParams& params, const AttentionOptions& o) {
  const Tensor& g = params.g;
  QKGRAD_CHECK(q.rank() == 3 && k_all.rank() == 3 && q.size(2) % o.heads == 0,
               "attention_logits: q and k must be [B, T, H·d]");
  const int64_t B = q.size(0), Tq = q.size(1), H = o.heads, d = q.size(2) / H;
  const int64_t Tk = o.kv_length >= 0 ? o.kv_length : k_all.size(1);
  const Tensor k = slice(k_all, 1, 0, Tk);
  // [B, T, H·d] -> [B, H, T, d]
  auto heads = [&](const Tensor& x) { return permute(x.reshape({B, x.size(1), H, d}), {0, 2, 1, 3}); };
  const Tensor qh = heads(q), kh = heads(k);
  Tensor S;  // [B, H, Tq, Tk]
  if (o.mode == AttentionMode::qknorm) {
    const Tensor gain = g.numel() == H && H > 1 ? g.reshape({H, 1, 1}) : g.reshape({});
    S = matmul(l2_normalize(qh, o.eps), l2_normalize(kh, o.eps), false, true) * gain;
  } else if (normalises_heads(o.mode)) {
    S = matmul(normalise(qh, params.q_gain, params.q_bias, o), normalise(kh, params.k_gain, params.k_bias, o), false, true) *
        (1.0 / std::sqrt(static_cast<double>(d)));
  } else {
    S = matmul(qh, kh, false, true) * (1.0 / std::sqrt(static_cast<double>(d)));
  }
  // The mask: 1 where key j is padding or (causal) in the future of query i.
  std::vector<double> mask(B * Tq * Tk, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t length = o.key_lengths.empty() ? Tk : o.key_lengths[b];
    for (int64_t i = 0; i < Tq; ++i)
      for (int64_t j = 0; j < Tk; ++j)
        mask[(b * Tq + i) * Tk + j] = (j >= length || (o.causal && j > i + o.query_offset)) ? 1 : 0;
  }
  return masked_fill(S, Tensor::from_vector(mask, {B, 1, Tq, Tk}, q.dtype(), q.device()), -INFINITY);
}

AttentionOutput attention_reference(const Tensor& q, const Tensor& k_all, const Tensor& v_all,
                                    const AttentionParams& params, const AttentionOptions& o) {
  const int64_t B = q.size(0), Tq = q.size(1), H = o.heads, d = q.size(2) / H;
  const int64_t Tk = o.kv_length >= 0 ? o.kv_length : k_all.size(1);
  const Tensor vh = permute(slice(v_all, 1, 0, Tk).reshape({B, Tk, H, d}), {0, 2, 1, 3});  // [B, H, Tk, d]
  const Tensor S = attention_logits(q, k_all, params, o);                                // [B, H, Tq, Tk]
  const Tensor P = softmax(S);
  const Tensor P_dropped = o.dropout > 0 ? dropout(P, o.dropout, *o.generator) : P;
  const Tensor out = permute(matmul(P_dropped, vh), {0, 2, 1, 3}).reshape({B, Tq, H * d});
  return {out, o.return_probs ? P.detach() : Tensor()};
}

}  // namespace qkgrad
