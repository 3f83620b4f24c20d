// Gradient-check cases for the fused attention op, both modes: cross-attention (Tq != Tk),
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

}  // namespace

void add_attention_cases(std::vector<OpCase>& cases) {
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
