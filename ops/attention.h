// Multi-head attention as one op: QKNorm (Henry et al. 2020), scaled dot-product, and the
// query-key normalisations of today's large models.
//
//   q: [B, Tq, H·d], k and v: [B, Tk, H·d]  ->  out: [B, Tq, H·d]
//   per batch entry b and head h (head h = columns [h·d, (h+1)·d)):
//     qknorm:        S = g · q̂ k̂ᵀ + M,  q̂ = q / max(‖q‖, eps) row-wise (same for k)
//     scaled_dot:    S = q kᵀ / √d + M
//     rms_qknorm:    S = q̂ k̂ᵀ / √d + M,  q̂ = γ_q ⊙ q / √(mean(q²) + eps)  (RMSNorm per head:
//                    OLMo 2, Qwen 3, Gemma 3), k̂ likewise with γ_k
//     layer_qknorm:  S = q̂ k̂ᵀ / √d + M,  q̂ = γ_q ⊙ (q − μ) / √(σ² + eps) + β_q  (LayerNorm per
//                    head: ViT-22B), k̂ likewise
//     P = softmax(S) row-wise,  P' = dropout(P),  out = P' v
// qknorm and scaled_dot are one fused kernel (Backend::attention_forward/backward); the two
// normalised modes normalise each head's rows with the fused rms_norm / layer_norm op and then
// run the scaled_dot kernel on q̂ and k̂, so that every part has its hand-derived backward.
// M is 0 or −∞ from key padding (key_lengths) and the causal mask. Every logit of QKNorm lies
// in [−g, g]. The derivation of the backward is docs/qknorm-attention.md; the same function
// composed from primitive ops is attention_reference below.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/generator.h"
#include "core/tensor.h"

namespace qkgrad {

// AttentionMode (qknorm, scaled_dot, rms_qknorm, layer_qknorm) is core/backend.h's: the one
// list of the modes, from this op down to the kernels.

// "qknorm", "scaled_dot", "rms_qknorm", "layer_qknorm", and back (unknown names throw, listing
// the modes).
const char* attention_mode_name(AttentionMode mode);
AttentionMode attention_mode_from_name(const std::string& name);
std::vector<std::string> attention_mode_names();  // every mode's, in kAttentionModes' order
std::string attention_mode_choices();             // "qknorm, scaled_dot, rms_qknorm or layer_qknorm"
bool normalises_heads(AttentionMode mode);  // rms_qknorm or layer_qknorm

// The learned parameters of a mode. qknorm: the gain g, [] or [1] (one per attention module, as
// in the paper) or [H] (one per head). rms_qknorm: the per-dimension gains of the query and key
// norms, [d] (shared by the heads, as in Qwen 3 and Gemma 3) or [H, d] (one per head);
// layer_qknorm: those and the biases, of the same shape. scaled_dot: none. Made from a Tensor
// implicitly, so that attention(q, k, v, g, o) reads as before.
struct AttentionParams {
  AttentionParams(Tensor gain = Tensor()) : g(std::move(gain)) {}  // NOLINT: implicit on purpose
  Tensor g;
  Tensor q_gain, k_gain;
  Tensor q_bias, k_bias;
};

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

AttentionOutput attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                          const AttentionOptions& options);

// The logits S [B, H, Tq, Tk] of the mode (the masked entries −∞), composed from primitive ops:
// the first half of attention_reference, for the programs that watch their size (the largest
// attention logit, the entropy of softmax(S)).
Tensor attention_logits(const Tensor& q, const Tensor& k, const AttentionParams& params, const AttentionOptions& options);
// The same function built from primitive ops (l2_normalize, mean, rsqrt, matmul, masked_fill,
// softmax, dropout): slower and hungrier, but easy to read. Tests and the benchmark compare
// against it.
AttentionOutput attention_reference(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionParams& params, const AttentionOptions& options);

// The paper's initial gain: g₀ = log2(L² − L), L = the 97.5th percentile of training sequence
// lengths (in subword tokens). For L = 72, g₀ ≈ 12.3.
double qknorm_initial_g(double length);

// Attention of the newest query steps q [B, t, H·d] over the first `length` rows of keys and
// values [B, capacity, H·d], which must already hold the keys and values of those steps: equal
// to the last t rows of the full causal computation. (nn/kv_cache.h keeps such a cache for
// incremental decoding.)
AttentionOutput attention_step(const Tensor& q, const Tensor& keys, const Tensor& values, int64_t length,
                               const AttentionParams& params, AttentionOptions options);

}  // namespace qkgrad
