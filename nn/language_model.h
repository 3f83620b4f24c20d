// A decoder-only Transformer language model, the kind QK-norm is used in today (OLMo 2, Qwen 3,
// Gemma 3, modded-nanogpt), at the size of two CPU cores: PreNorm blocks (RMSNorm by
// default), causal self-attention through the fused attention op in any of its modes, rotary
// positions (RoPE) on q and k, a GELU (ReLU, SwiGLU) feed-forward layer, biases or none, and tied or separate
// input and output embeddings.
//
//   x = embed(ids)                                                        [B, T, D]
//   block:  x = x + drop(CausalSelfAttn(norm₁(x)));  x = x + drop(FFN(norm₂(x)))
//   logits = norm_f(x) Eᵀ  (tied: E is the embedding)  or  norm_f(x) W_outᵀ  [B, T, V]
//
// The QK norms of rms_qknorm and layer_qknorm come before the rotation by default (Qwen 3,
// Gemma 3), per head or over the whole projection (OLMo 2), with gains γ or 1 + w (Gemma 3), or
// after it inside the fused op (qk_norm_position); for qknorm's l2 norm the order does not
// matter (a rotation keeps the length).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/setting.h"
#include "nn/kv_cache.h"
#include "nn/layers.h"
#include "nn/multihead_attention.h"
#include "ops/attention.h"

namespace qkgrad {

// The language model's hyperparameters, each written once (core/setting.h):
//   X(type, name, default, resume rule, what it allows, help)
#define QKGRAD_LANGUAGE_MODEL_HYPERPARAMETERS(X)                                                                       \
  X(int64_t, layers, 4, Resume::fixed, range(1, 64), "decoder blocks")                                                 \
  X(int64_t, d_model, 256, Resume::fixed, range(2, 16384), "model width")                                              \
  X(int64_t, heads, 4, Resume::fixed, range(1, 256), "attention heads")                                                \
  X(int64_t, ffn, 1024, Resume::fixed, range(1, 65536), "feed-forward width")                                          \
  X(std::string, activation, "gelu", Resume::fixed, one_of({"relu", "gelu", "swiglu"}),                               \
    "the feed-forward layer: relu or gelu, or swiglu, silu(x W1) * (x W3) then W2 (Llama, Qwen 3, OLMo 2; a third "  \
    "matrix: lower --ffn to about 2/3 to keep the size)")                                                            \
  X(std::string, biases, "on", Resume::fixed, one_of({"on", "off"}),                                                   \
    "biases in the attention projections and the feed-forward layer (off: none, as in Llama, Qwen 3, OLMo 2)")        \
  X(NormType, norm, NormType::rms_norm, Resume::fixed, one_of(norm_names()), "the blocks' and the final norm")         \
  X(AttentionMode, attention, AttentionMode::scaled_dot, Resume::fixed, one_of(attention_mode_names()),                \
    "attention: scaled_dot (the baseline), qknorm (l2 norm and a learned g), rms_qknorm (RMSNorm of each head's q "   \
    "and k with learned gains: Qwen 3) or layer_qknorm (qk-layernorm: ViT-22B, Wortsman et al.)")                     \
  X(std::string, qk_norm_position, "before_rope", Resume::fixed, one_of({"before_rope", "after_rope"}),               \
    "rms_qknorm, layer_qknorm: normalise q and k before the rotation (Qwen 3, Gemma 3, OLMo 2) or after it, inside "  \
    "the fused attention op (qknorm's l2 norm commutes with the rotation: either is the same)")                      \
  X(std::string, qk_norm_scope, "head", Resume::fixed, one_of({"head", "projection"}),                                 \
    "rms_qknorm, layer_qknorm: a norm per head (Qwen 3, Gemma 3) or one over the whole q (and k) projection before "  \
    "the split into heads (OLMo 2; before_rope only)")                                                                \
  X(std::string, qk_gain, "gamma", Resume::fixed, one_of({"gamma", "one_plus_w"}),                                     \
    "the q and k norms' gains: gamma initialised to 1, or 1 + w with w initialised to 0 (Gemma 3)")                   \
  X(double, rope_base, 10000, Resume::fixed, range(0, 1e9), "RoPE's base (0: no positions at all)")                   \
  X(std::string, tied_embeddings, "on", Resume::fixed, one_of({"on", "off"}),                                          \
    "on: the output layer is the input embedding; off: a separate [V, D] output matrix")                              \
  X(DType, dtype, DType::f32, Resume::fixed, one_of({"f32", "f64"}), "float type of the model")                        \
  X(double, dropout, 0.0, Resume::may_change, range(0, 0.99), "dropout on the residual branches and the embeddings")   \
  X(double, attention_dropout, 0.0, Resume::may_change, range(0, 0.99), "dropout on the attention probabilities")

struct LanguageModelHyperparameters {
  QKGRAD_LANGUAGE_MODEL_HYPERPARAMETERS(QKGRAD_SETTING_MEMBER)

  // visit(const SettingInfo&, member&) for each hyperparameter, in the table's order.
  template <typename Self, typename Visit>
  static void for_each(Self& self, Visit&& visit) {
    QKGRAD_LANGUAGE_MODEL_HYPERPARAMETERS(QKGRAD_SETTING_VISIT)
  }
};

// The hyperparameters and what a program derives for them.
struct LanguageModelConfig : LanguageModelHyperparameters {
  int64_t vocab = 256;        // e.g. bytes
  double qknorm_length = 64;  // qknorm: g₀ = log2(L² − L), L the typical context length
  uint64_t seed = 1;          // initialisation, and the dropout stream

  void validate() const;  // throws an Error naming the first bad field
};

class DecoderBlock : public Module {
 public:
  DecoderBlock(const LanguageModelConfig& c, const InitContext& init);
  // x [B, T, D]; keys at positions >= lengths[b] are padding.
  Tensor forward(const Tensor& x, const std::vector<int64_t>& lengths, Generator& gen) const;
  Tensor forward_step(const Tensor& x_step, KVCache& cache, Generator& gen) const;  // x_step [B, t, D]

  std::unique_ptr<NormLayer> norm1, norm2;
  MultiHeadAttention attn;
  FeedForward ffn;
  double dropout_p;
};

class LanguageModel : public Module {
 public:
  explicit LanguageModel(const LanguageModelConfig& config, Device device = Device::cpu);

  // ids [B, T] (i64), right-padded; lengths count each row's real tokens. Returns the logits
  // [B, T, V] of each position's next token.
  Tensor forward(const Tensor& ids, const std::vector<int64_t>& lengths);

  // Generation: one KV cache per block, then a step at a time.
  struct DecodeState {
    std::vector<KVCache> caches;
  };
  DecodeState start_decoding(int64_t batch, int64_t max_tokens) const;
  // tokens [B, t] (i64): the next tokens of each row -> logits [B, t, V].
  Tensor decode_step(DecodeState& state, const Tensor& tokens);

  // How large and how peaked each block's attention is on ids [B, T] (no gradient, no dropout):
  // the largest |logit| over the entries a query sees (Wortsman et al.'s instability signal:
  // it grows without bound before a high learning rate diverges) and the mean entropy (nats)
  // of the probability rows (collapse: near 0).
  struct AttentionProbe {
    double max_logit = 0, mean_entropy = 0;
  };
  std::vector<AttentionProbe> probe_attention(const Tensor& ids, const std::vector<int64_t>& lengths);

  // The parameters weight decay leaves alone, as AdamOptions::no_decay fragments (substrings of
  // the names): the norms' gains and biases ("norm": norm1, q_norm, final_norm, ...), QKNorm's
  // g ("attn.g"), the biases.
  static std::vector<std::string> no_weight_decay() { return {"norm", "attn.g", "bias"}; }

  const LanguageModelConfig& config() const { return config_; }
  Device device() const { return init_.device; }
  Generator& dropout_generator() { return dropout_gen_; }

 private:
  Tensor logits(const Tensor& x) const;  // norm_f(x) Eᵀ (or W_outᵀ): [B, T, D] -> [B, T, V]

  LanguageModelConfig config_;
  Generator init_gen_;
  Generator dropout_gen_;
  InitContext init_;

 public:
  Embedding embedding;
  std::vector<std::unique_ptr<DecoderBlock>> blocks;
  std::unique_ptr<NormLayer> final_norm;
  std::unique_ptr<Linear> output;  // tied_embeddings off only
};

}  // namespace qkgrad
