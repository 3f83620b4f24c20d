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

#include "nn/layers.h"
#include "nn/multihead_attention.h"

namespace qkgrad {

// The special token ids, defined once: the subword model is trained to give these pieces these
// ids (translation/subwords.h), a model's config records the ids it was built with (checkpoints
// keep them), and batches are padded and framed with its config's ids (translation/batching.h).
struct SpecialIds {
  int64_t pad = 0, bos = 1, eos = 2, unk = 3;
};

struct TransformerConfig {
  int64_t vocab = 8000;
  int64_t d_model = 512;
  int64_t heads = 8;
  int64_t ffn = 2048;
  int64_t encoder_layers = 6;
  int64_t decoder_layers = 6;
  NormType norm = NormType::layer_norm;
  AttentionMode attention = AttentionMode::qknorm;
  bool per_head_g = false;
  double qknorm_length = 72;  // L, the 97.5th percentile of training lengths: g₀ = log2(L² − L)
  bool fixnorm = true;
  double dropout = 0.1;            // residual branches and embeddings
  double attention_dropout = 0.1;  // attention probabilities
  double ffn_dropout = 0.1;        // the feed-forward hidden layer
  double word_dropout = 0.1;       // token ids replaced by unk_id (training only)
  int64_t pad_id = SpecialIds{}.pad, bos_id = SpecialIds{}.bos, eos_id = SpecialIds{}.eos, unk_id = SpecialIds{}.unk;
  uint64_t seed = 1;               // initialisation, and the dropout stream
  DType dtype = DType::f32;
  // Which subword vocabulary the embedding rows stand for (a program's fingerprint of it, e.g.
  // "fnv1a64:..." of the SentencePiece model); "" when unknown. Loading a checkpoint into a
  // model whose vocabulary_id differs is refused: the same size does not make the same pieces.
  std::string vocabulary_id;

  void validate() const;  // throws an Error naming the first bad field
  // The number of parameters a model of this config has (Seq2SeqTransformer::parameter_count).
  int64_t parameter_count() const;
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
  };
  DecodeState start_decoding(const Tensor& memory, const std::vector<int64_t>& src_lengths,
                             int64_t max_steps);
  // tokens [B] (i64): the previous output token of each row -> logits [B, V] for the next one.
  Tensor decode_step(DecodeState& state, const Tensor& tokens);
  // Keeps rows[i] of every cached tensor as row i (beam search); rows: i64 on the model's device.
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
