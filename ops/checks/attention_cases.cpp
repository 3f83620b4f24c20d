// Gradient-check cases for RoPE and for the attention op, every mode: cross-attention (Tq != Tk),
// padding masks, causal masks, H = 1 and H > 1, head sizes that are not a multiple of the SIMD
// width, a per-head gain, attention dropout, and a batch entry with no visible key at all.
#include "ops/checks/op_cases.h"
#include "ops/ops.h"

namespace qkgrad {

namespace {

OpCase attention_case(const std::string& op, const std::string& name, int64_t B, int64_t Tq, int64_t Tk,
                      int64_t H, int64_t d, AttentionOptions o, Shape g_shape = {}) {
  o.heads = H;
  const bool qk = op == "attention_qknorm";
  o.mode = qk ? AttentionMode::qknorm : AttentionMode::scaled_dot;
  std::vector<InputSpec> inputs = {{{B, Tq, H * d}, InputDomain::normal},
                                   {{B, Tk, H * d}, InputDomain::normal},
                                   {{B, Tk, H * d}, InputDomain::normal}};
  if (qk) inputs.push_back({g_shape, InputDomain::positive});
  const double dropout_p = o.dropout;
  return {op, name, inputs, [o, qk, dropout_p](const std::vector<Tensor>& x) {
            AttentionOptions opts = o;
            Generator gen(29);  // the same dropout mask in every forward of the check
            if (dropout_p > 0) opts.generator = &gen;
            // g is scaled up so the softmax is far from uniform (g ∈ [1.5, 6]).
            return attention(x[0], x[1], x[2], qk ? x[3] * 3.0 : Tensor(), opts).out;
          }};
}

// rms_qknorm and layer_qknorm: inputs q, k, v, the query and key gains, and (layer) their
// biases; each gain and bias [d] (shared by the heads) or [H, d] (per head).
OpCase normalised_case(AttentionMode mode, const std::string& name, int64_t B, int64_t Tq, int64_t Tk, int64_t H,
                       int64_t d, AttentionOptions o, bool per_head) {
  o.heads = H;
  o.mode = mode;
  const bool layer = mode == AttentionMode::layer_qknorm;
  const Shape p = per_head ? Shape{H, d} : Shape{d};
  std::vector<InputSpec> inputs = {{{B, Tq, H * d}, InputDomain::normal},
                                   {{B, Tk, H * d}, InputDomain::normal},
                                   {{B, Tk, H * d}, InputDomain::normal},
                                   {p, InputDomain::normal},
                                   {p, InputDomain::normal}};
  if (layer) {
    inputs.push_back({p, InputDomain::normal});
    inputs.push_back({p, InputDomain::normal});
  }
  const double dropout_p = o.dropout;
  return {std::string("attention_") + attention_mode_name(mode), name, inputs, [o, layer, dropout_p](const std::vector<Tensor>& x) {
            AttentionOptions opts = o;
            Generator gen(29);  // the same dropout mask in every forward of the check
            if (dropout_p > 0) opts.generator = &gen;
            AttentionParams params;
            params.q_gain = x[3] * 2.0;  // gains ~ N(0, 4): a softmax far from uniform
            params.k_gain = x[4] * 2.0;
            if (layer) {
              params.q_bias = x[5];
              params.k_bias = x[6];
            }
            return attention(x[0], x[1], x[2], params, opts).out;
          }};
}

}  // namespace

void add_attention_cases(std::vector<OpCase>& cases) {
  // RoPE: each output weighted by its own ramp value, so that no rotation's sum hides an error.
  auto ramp = [](const Tensor& y) {
    return y * (Tensor::arange(y.numel(), y.dtype(), y.device()) * 0.25 + 0.5).reshape(y.shape());
  };
  cases.push_back({"rope", "B2 T3 H2 d4 from position 0", {{{2, 3, 8}, InputDomain::normal}},
                   [ramp](const std::vector<Tensor>& x) { return ramp(rope(x[0], 2)); }});
  cases.push_back({"rope", "B1 T2 H1 d6 from position 5, base 100 (large angles)", {{{1, 2, 6}, InputDomain::normal}},
                   [ramp](const std::vector<Tensor>& x) { return ramp(rope(x[0], 1, 5, 100.0)); }});
  // The QK norm before the rotation (nn/multihead_attention.h's norm_before_rope): RMSNorm of each
  // head with gains [d] (Qwen 3), or of the whole projection with gains [H·d] (OLMo 2), then RoPE,
  // then causal scaled dot-product attention. Inputs q, k, v [1, 3, 8] (H 2, d 4) and the gains.
  for (const bool whole : {false, true}) {
    const Shape gain = whole ? Shape{8} : Shape{4};
    cases.push_back({"rope", whole ? "after RMSNorm of the whole q and k projection (OLMo 2), in causal attention"
                                   : "after RMSNorm of each head of q and k (Qwen 3), in causal attention",
                     {{{1, 3, 8}, InputDomain::normal}, {{1, 3, 8}, InputDomain::normal}, {{1, 3, 8}, InputDomain::normal},
                      {gain, InputDomain::normal}, {gain, InputDomain::normal}},
                     [whole](const std::vector<Tensor>& x) {
                       auto norm = [whole](const Tensor& v, const Tensor& g) {
                         const Tensor rows = whole ? v : v.reshape({1, 3, 2, 4});
                         return rms_norm(rows, g * 2.0).reshape({1, 3, 8});  // gains ~ N(0, 4)
                       };
                       AttentionOptions o;
                       o.heads = 2;
                       o.mode = AttentionMode::scaled_dot;
                       o.causal = true;
                       return attention(rope(norm(x[0], x[3]), 2), rope(norm(x[1], x[4]), 2), x[2], Tensor(), o).out;
                     }});
  }
  for (AttentionMode mode : {AttentionMode::rms_qknorm, AttentionMode::layer_qknorm}) {
    AttentionOptions plain;
    cases.push_back(normalised_case(mode, "cross-attention B2 Tq3 Tk4 H2 d3, shared gains [d]", 2, 3, 4, 2, 3, plain, false));
    AttentionOptions causal;
    causal.causal = true;
    causal.key_lengths = {3, 4};
    cases.push_back(normalised_case(mode, "causal with padding, T4 H2 d3, gains per head [H, d]", 2, 4, 4, 2, 3, causal, true));
    AttentionOptions dropped;
    dropped.dropout = 0.3;
    cases.push_back(normalised_case(mode, "attention dropout 0.3, T3 H2 d2", 1, 3, 3, 2, 2, dropped, false));
    AttentionOptions empty_row;
    empty_row.key_lengths = {0, 3};
    cases.push_back(normalised_case(mode, "a batch entry with no visible key (output 0)", 2, 2, 3, 1, 4, empty_row, false));
    AttentionOptions cached;  // the KV-cache path: only the first kv_length keys are used
    cached.kv_length = 2;
    cached.causal = true;
    cached.query_offset = 1;
    cases.push_back(normalised_case(mode, "kv_length 2 of 3 cached keys, query_offset 1", 1, 1, 3, 2, 3, cached, false));
  }
  for (const std::string op : {"attention_qknorm", "attention_scaled_dot"}) {
    AttentionOptions plain;
    cases.push_back(attention_case(op, "cross-attention B2 Tq3 Tk4 H2 d3", 2, 3, 4, 2, 3, plain));
    AttentionOptions padded;
    padded.key_lengths = {4, 2};
    cases.push_back(attention_case(op, "padding masks (lengths 4, 2), H1 d5", 2, 2, 4, 1, 5, padded));
    AttentionOptions causal;
    causal.causal = true;
    causal.key_lengths = {3, 4};
    cases.push_back(attention_case(op, "causal self-attention with padding, T4 H2 d3", 2, 4, 4, 2, 3, causal));
    AttentionOptions dropped;
    dropped.dropout = 0.3;
    cases.push_back(attention_case(op, "attention dropout 0.3, T3 H2 d2", 1, 3, 3, 2, 2, dropped));
    AttentionOptions empty_row;
    empty_row.key_lengths = {0, 3};
    cases.push_back(attention_case(op, "a batch entry with no visible key (output 0)", 2, 2, 3, 1, 4, empty_row));
  }
  AttentionOptions per_head;
  per_head.causal = true;
  cases.push_back(attention_case("attention_qknorm", "one gain per head g [3], causal, d 3", 1, 3, 3, 3, 3,
                                 per_head, Shape{3}));
  AttentionOptions wide;
  cases.push_back(attention_case("attention_qknorm", "d 17 (past a SIMD width), H1", 1, 2, 3, 1, 17, wide, Shape{1}));
}

}  // namespace qkgrad
