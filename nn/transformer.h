// The paper's encoder–decoder Transformer (Henry et al. 2020, after Nguyen & Salazar 2019):
// PreNorm residual blocks, a final norm after the encoder and the decoder, LayerNorm or
// ScaleNorm, FixNorm tied embeddings (one joint vocabulary for source, target and output),
// sinusoidal positions, ReLU feed-forward, dropout on residual branches, attention
// probabilities and the feed-forward hidden layer, word dropout, and QKNorm or scaled
// dot-product attention.
//
//   encoder layer:  x = x + drop(SelfAttn(norm₁(x)));  x = x + drop(FFN(norm₂(x)))
//   decoder layer:  y = y + drop(CausalSelfAttn(norm₁(y)));  y = y + drop(CrossAttn(norm₂(y), memory))
//                   y = y + drop(FFN(norm₃(y)))
//   memory = norm_enc(encoder layers(drop(embed(src) + pos)))
//   logits = embedding.logits(norm_dec(decoder layers(drop(embed(tgt_in) + pos))))
#pragma once

#include <memory>
#include <vector>

#include "core/setting.h"
#include "nn/layers.h"
#include "nn/multihead_attention.h"
#include "ops/attention.h"

namespace qkgrad {

// The special token ids, defined once: the subword model is trained to give these pieces these
// ids (translation/subwords.h), a model's config records the ids it was built with (checkpoints
// keep them), and batches are padded and framed with its config's ids (translation/batching.h).
struct SpecialIds {
  int64_t pad = 0, bos = 1, eos = 2, unk = 3;
};

// The model's hyperparameters, each written once (core/setting.h):
//   X(type, name, default, resume rule, what it allows, help)
// From this table come TransformerConfig's members, their keys in a checkpoint's config.json
// (io/checkpoint.cpp), and qkgrad-translate train's flags, --help, options.json and config
// files (translation/settings.h). A new hyperparameter is a line here, its use in the model
// and a test (README, "Adding a model hyperparameter").
#define QKGRAD_TRANSFORMER_HYPERPARAMETERS(X)                                                                         \
  X(int64_t, d_model, 512, Resume::fixed, range(2, 16384), "model width")                                              \
  X(int64_t, heads, 8, Resume::fixed, range(1, 256), "attention heads")                                                \
  X(int64_t, ffn, 2048, Resume::fixed, range(1, 65536), "feed-forward width")                                          \
  X(std::string, activation, "relu", Resume::fixed, one_of({"relu", "gelu"}),                                          \
    "the feed-forward activation: relu (the paper) or gelu (tanh form, as in BERT and GPT-2)")                        \
  X(NormType, norm, NormType::layer_norm, Resume::fixed, one_of(norm_names()), "normalisation")                       \
  X(AttentionMode, attention, AttentionMode::qknorm, Resume::fixed, one_of(attention_mode_names()),                   \
    "attention: qknorm (the paper), scaled_dot, rms_qknorm (RMSNorm of each head's q and k, learned gains: OLMo 2, "  \
    "Qwen 3) or layer_qknorm (LayerNorm per head: ViT-22B)")                                                           \
  X(DType, dtype, DType::f32, Resume::fixed, one_of({"f32", "f64"}),                                                   \
    "float type of the model: f32, or f64 (several times slower; for exact cross-checks)")                             \
  X(double, dropout, 0.1, Resume::may_change, range(0, 0.99), "dropout on the residual branches and the embeddings")  \
  X(double, attention_dropout, 0.1, Resume::may_change, range(0, 0.99), "dropout on the attention probabilities")     \
  X(double, ffn_dropout, 0.1, Resume::may_change, range(0, 0.99), "dropout on the feed-forward layer's ReLU output")         \
  X(double, word_dropout, 0.1, Resume::may_change, range(0, 0.99),                                                     \
    "word dropout: the share of input tokens replaced by unk (training only)")

struct TransformerHyperparameters {
  QKGRAD_TRANSFORMER_HYPERPARAMETERS(QKGRAD_SETTING_MEMBER)

  // visit(const SettingInfo&, member&) for each hyperparameter, in the table's order.
  template <typename Self, typename Visit>
  static void for_each(Self& self, Visit&& visit) {
    QKGRAD_TRANSFORMER_HYPERPARAMETERS(QKGRAD_SETTING_VISIT)
  }
};

// The hyperparameters and what a program derives for them: the vocabulary (from its subwords),
// the depths, QKNorm's L (from its data), the special ids and the seed.
struct TransformerConfig : TransformerHyperparameters {
  int64_t vocab = 8000;
  int64_t encoder_layers = 6;
  int64_t decoder_layers = 6;
  bool per_head_g = false;    // QKNorm's g per head ([H]), or the q/k norms' gains per head ([H, d])
  double qknorm_length = 72;  // L, the 97.5th percentile of training lengths: g₀ = log2(L² − L)
  bool fixnorm = true;        // unit-length tied embeddings (the paper's)
  int64_t pad_id = SpecialIds{}.pad, bos_id = SpecialIds{}.bos, eos_id = SpecialIds{}.eos, unk_id = SpecialIds{}.unk;
  uint64_t seed = 1;               // initialisation, and the dropout stream
  // Which subword vocabulary the embedding rows stand for (a program's fingerprint of it, e.g.
  // "fnv1a64:..." of the SentencePiece model); "" when unknown. Loading a checkpoint into a
  // model whose vocabulary_id differs is refused: the same size does not make the same pieces.
  std::string vocabulary_id;

  void validate() const;  // throws an Error naming the first bad field
  // A lower bound of the parameter count: the weight matrices every variant of the model has
  // (the embedding, the attention projections, the feed-forward layers). A checkpoint's loader
  // checks the file is at least this large before building the model; the exact count is the
  // built model's (Module::parameter_count).
  int64_t minimum_parameter_count() const;
};

class EncoderLayer : public Module {
 public:
  EncoderLayer(const TransformerConfig& c, const InitContext& init);
  Tensor forward(const Tensor& x, const std::vector<int64_t>& lengths, Generator& gen) const;

  std::unique_ptr<NormLayer> norm1, norm2;
  MultiHeadAttention self_attn;
  FeedForward ffn;
  double dropout_p;
};

class DecoderLayer : public Module {
 public:
  DecoderLayer(const TransformerConfig& c, const InitContext& init);
  Tensor forward(const Tensor& y, const std::vector<int64_t>& lengths,
                 const MultiHeadAttention::Memory& memory, Generator& gen) const;
  Tensor forward_step(const Tensor& y_step, KVCache& cache, const MultiHeadAttention::Memory& memory,
                      Generator& gen) const;

  std::unique_ptr<NormLayer> norm1, norm2, norm3;
  MultiHeadAttention self_attn, cross_attn;
  FeedForward ffn;
  double dropout_p;
};

class Seq2SeqTransformer : public Module {
 public:
  // Every parameter is created on `device` (the initial values are the same on every device).
  // The device is not part of the config, nor of a checkpoint: a model trained on one device
  // loads on another.
  explicit Seq2SeqTransformer(const TransformerConfig& config, Device device = Device::cpu);

  // Where the parameters live. Every tensor given to the model (token ids, beam-search rows)
  // must be on this device too; what the model makes itself (positions, caches) is.
  Device device() const { return init_.device; }

  // Teacher forcing. src [B, S], tgt_in [B, T]: i64 ids padded with pad_id; the lengths count
  // the real tokens of each row. Returns logits [B, T, V].
  Tensor forward(const Tensor& src, const std::vector<int64_t>& src_lengths, const Tensor& tgt_in,
                 const std::vector<int64_t>& tgt_lengths);

  // Inference: encode once, then decode one step at a time with per-layer caches.
  Tensor encode(const Tensor& src, const std::vector<int64_t>& src_lengths);  // memory [B, S, D]
  struct DecodeState {
    std::vector<MultiHeadAttention::Memory> cross;  // per decoder layer: projected memory
    std::vector<KVCache> self;                       // per decoder layer: self-attention cache
    int64_t step = 0;                                // tokens decoded so far
    std::vector<int64_t> memory_rows;                // row i's cross memory: that of source memory_rows[i]
    Tensor output_rows;                              // [V, D] the output layer's rows (Embedding::output_rows)
  };
  DecodeState start_decoding(const Tensor& memory, const std::vector<int64_t>& src_lengths,
                             int64_t max_steps);
  // tokens [B] (i64): the previous output token of each row -> logits [B, V] for the next one.
  Tensor decode_step(DecodeState& state, const Tensor& tokens);
  // Keeps rows[i] of every cached tensor as row i (beam search); rows: i64 on the model's device.
  // The cross-attention memory is copied only when some row changes source (a beam search's
  // reorders within each source's beams leave it as it is).
  void reorder(DecodeState& state, const Tensor& rows) const;

  const TransformerConfig& config() const { return config_; }
  // The dropout stream. Its offset is part of the trainer state (exact resume).
  Generator& dropout_generator() { return dropout_gen_; }
  // The learned gains of every attention module, by parameter name: QKNorm's g, or the query and
  // key norms' γ (q_norm.gamma, k_norm.gamma) of rms_qknorm and layer_qknorm; empty for scaled_dot.
  std::vector<NamedTensor> attention_gains() const;

 private:
  Tensor embed_with_positions(const Tensor& ids, int64_t first_position);
  Tensor positions(int64_t first, int64_t count);  // sinusoidal rows [count, D]
  // Throws a clear Error when `ids` (named `what` in it) is not on the model's device.
  void check_on_device(const char* what, const Tensor& ids) const;

  TransformerConfig config_;
  Generator init_gen_;
  Generator dropout_gen_;
  InitContext init_;

 public:
  Embedding embedding;
  std::vector<std::unique_ptr<EncoderLayer>> encoder_layers;
  std::unique_ptr<NormLayer> encoder_norm;
  std::vector<std::unique_ptr<DecoderLayer>> decoder_layers;
  std::unique_ptr<NormLayer> decoder_norm;

 private:
  Tensor position_table_;  // grown on demand, on the model's device
};

}  // namespace qkgrad
