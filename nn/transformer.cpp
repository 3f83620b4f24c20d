#include "nn/transformer.h"

#include <string>

#include "core/autograd.h"
#include "core/error.h"
#include "ops/ops.h"

namespace qkgrad {

void TransformerConfig::validate() const {
  QKGRAD_CHECK(vocab >= 4, "TransformerConfig: vocab must be >= 4 (pad, bos, eos, unk), got ", vocab);
  QKGRAD_CHECK(d_model >= 1 && heads >= 1 && d_model % heads == 0, "TransformerConfig: d_model ",
               d_model, " must be divisible into ", heads, " heads");
  QKGRAD_CHECK(ffn >= 1, "TransformerConfig: ffn must be >= 1, got ", ffn);
  QKGRAD_CHECK(encoder_layers >= 1 && decoder_layers >= 1,
               "TransformerConfig: need at least one encoder and one decoder layer");
  for (const auto& [name, p] : {std::pair{"dropout", dropout}, std::pair{"attention_dropout", attention_dropout},
                                std::pair{"ffn_dropout", ffn_dropout}, std::pair{"word_dropout", word_dropout}}) {
    QKGRAD_CHECK(p >= 0 && p < 1, "TransformerConfig: ", name, " must be in [0, 1), got ", p);
  }
  QKGRAD_CHECK(attention != AttentionMode::qknorm || qknorm_length > 1,
               "TransformerConfig: qknorm_length (L) must be > 1, got ", qknorm_length);
  for (const auto& [name, id] : {std::pair{"pad_id", pad_id}, std::pair{"bos_id", bos_id},
                                 std::pair{"eos_id", eos_id}, std::pair{"unk_id", unk_id}}) {
    QKGRAD_CHECK(id >= 0 && id < vocab, "TransformerConfig: ", name, " ", id, " is outside the vocabulary [0, ", vocab, ")");
  }
  QKGRAD_CHECK(is_floating(dtype), "TransformerConfig: dtype must be f32 or f64");
}

int64_t TransformerConfig::minimum_parameter_count() const {
  const int64_t D = d_model, F = ffn;
  const int64_t attention = 4 * D * D;  // W_q, W_k, W_v, W_o
  const int64_t feed_forward = 2 * D * F;
  return vocab * D + encoder_layers * (attention + feed_forward) + decoder_layers * (2 * attention + feed_forward);
}

namespace {
AttentionConfig attention_config(const TransformerConfig& c) {
  AttentionConfig a;
  a.dim = c.d_model;
  a.heads = c.heads;
  a.mode = c.attention;
  a.qknorm_length = c.qknorm_length;
  a.per_head_g = c.per_head_g;
  a.dropout = c.attention_dropout;
  return a;
}
}  // namespace

// ---- encoder and decoder layers ----

EncoderLayer::EncoderLayer(const TransformerConfig& c, const InitContext& init)
    : norm1(make_norm(c.norm, c.d_model, init)),
      norm2(make_norm(c.norm, c.d_model, init)),
      self_attn(attention_config(c), init),
      ffn(c.d_model, c.ffn, c.ffn_dropout, init, c.activation),
      dropout_p(c.dropout) {
  register_module("norm1", *norm1);
  register_module("self_attn", self_attn);
  register_module("norm2", *norm2);
  register_module("ffn", ffn);
}

Tensor EncoderLayer::forward(const Tensor& x, const std::vector<int64_t>& lengths, Generator& gen) const {
  const Tensor n1 = norm1->forward(x);                                                        // [B, S, D]
  const Tensor h = x + dropout(self_attn.forward(n1, n1, lengths, false, gen), dropout_p, gen, training());
  return h + dropout(ffn.forward(norm2->forward(h), gen), dropout_p, gen, training());
}

DecoderLayer::DecoderLayer(const TransformerConfig& c, const InitContext& init)
    : norm1(make_norm(c.norm, c.d_model, init)),
      norm2(make_norm(c.norm, c.d_model, init)),
      norm3(make_norm(c.norm, c.d_model, init)),
      self_attn(attention_config(c), init),
      cross_attn(attention_config(c), init),
      ffn(c.d_model, c.ffn, c.ffn_dropout, init, c.activation),
      dropout_p(c.dropout) {
  register_module("norm1", *norm1);
  register_module("self_attn", self_attn);
  register_module("norm2", *norm2);
  register_module("cross_attn", cross_attn);
  register_module("norm3", *norm3);
  register_module("ffn", ffn);
}

Tensor DecoderLayer::forward(const Tensor& y, const std::vector<int64_t>& lengths,
                             const MultiHeadAttention::Memory& memory, Generator& gen) const {
  const Tensor n1 = norm1->forward(y);                                                        // [B, T, D]
  const Tensor h1 = y + dropout(self_attn.forward(n1, n1, lengths, true, gen), dropout_p, gen, training());
  const Tensor h2 = h1 + dropout(cross_attn.forward_memory(norm2->forward(h1), memory, gen), dropout_p, gen, training());
  return h2 + dropout(ffn.forward(norm3->forward(h2), gen), dropout_p, gen, training());
}

Tensor DecoderLayer::forward_step(const Tensor& y_step, KVCache& cache, const MultiHeadAttention::Memory& memory,
                                  Generator& gen) const {
  const Tensor h1 = y_step + dropout(self_attn.forward_step(norm1->forward(y_step), cache, gen), dropout_p, gen, training());
  const Tensor h2 = h1 + dropout(cross_attn.forward_memory(norm2->forward(h1), memory, gen), dropout_p, gen, training());
  return h2 + dropout(ffn.forward(norm3->forward(h2), gen), dropout_p, gen, training());
}

// ---- the whole model ----

Seq2SeqTransformer::Seq2SeqTransformer(const TransformerConfig& c, Device device)
    : config_((c.validate(), c)),
      init_gen_(c.seed, /*stream=*/1),
      dropout_gen_(c.seed, /*stream=*/2),
      init_{init_gen_, c.dtype, device},
      embedding(c.vocab, c.d_model, c.fixnorm, init_) {
  register_module("embedding", embedding);
  for (int64_t i = 0; i < c.encoder_layers; ++i) {
    encoder_layers.push_back(std::make_unique<EncoderLayer>(c, init_));
    register_module("encoder.layers." + std::to_string(i), *encoder_layers.back());
  }
  encoder_norm = make_norm(c.norm, c.d_model, init_);
  register_module("encoder.norm", *encoder_norm);
  for (int64_t i = 0; i < c.decoder_layers; ++i) {
    decoder_layers.push_back(std::make_unique<DecoderLayer>(c, init_));
    register_module("decoder.layers." + std::to_string(i), *decoder_layers.back());
  }
  decoder_norm = make_norm(c.norm, c.d_model, init_);
  register_module("decoder.norm", *decoder_norm);
}

Tensor Seq2SeqTransformer::positions(int64_t first, int64_t count) {
  if (!position_table_.defined() || position_table_.size(0) < first + count) {
    const int64_t rows = std::max<int64_t>(first + count, 2 * (position_table_.defined() ? position_table_.size(0) : 64));
    position_table_ = sinusoidal_positions(rows, config_.d_model, config_.dtype, device());
  }
  return slice(position_table_, 0, first, first + count);  // [count, D]
}

void Seq2SeqTransformer::check_on_device(const char* what, const Tensor& ids) const {
  QKGRAD_CHECK(ids.device() == device(), "Seq2SeqTransformer: ", what, " (", describe(ids),
               ") is not on the model's device, ", device_name(device()),
               "; create it there, or move it with .to(Device::", device_name(device()), ")");
}

Tensor Seq2SeqTransformer::embed_with_positions(const Tensor& ids, int64_t first_position) {
  Tensor tokens = ids;
  if (training() && config_.word_dropout > 0) {
    tokens = word_dropout(ids, config_.word_dropout, config_.unk_id, dropout_gen_);
  }
  const Tensor x = embedding.embed(tokens) + positions(first_position, ids.size(1));  // [B, T, D]
  return dropout(x, config_.dropout, dropout_gen_, training());
}

Tensor Seq2SeqTransformer::encode(const Tensor& src, const std::vector<int64_t>& src_lengths) {
  QKGRAD_CHECK(src.rank() == 2, "Seq2SeqTransformer::encode: src must be [B, S] token ids, got ", src.shape());
  check_on_device("src", src);
  Tensor x = embed_with_positions(src, 0);
  for (const auto& layer : encoder_layers) x = layer->forward(x, src_lengths, dropout_gen_);
  return encoder_norm->forward(x);  // [B, S, D]
}

Tensor Seq2SeqTransformer::forward(const Tensor& src, const std::vector<int64_t>& src_lengths,
                                   const Tensor& tgt_in, const std::vector<int64_t>& tgt_lengths) {
  QKGRAD_CHECK(tgt_in.rank() == 2 && tgt_in.size(0) == src.size(0), "Seq2SeqTransformer: tgt_in ",
               tgt_in.shape(), " must be [B, T] with the batch size of src ", src.shape());
  check_on_device("tgt_in", tgt_in);
  const Tensor memory = encode(src, src_lengths);
  Tensor y = embed_with_positions(tgt_in, 0);
  for (const auto& layer : decoder_layers) {
    y = layer->forward(y, tgt_lengths, layer->cross_attn.project_memory(memory, src_lengths), dropout_gen_);
  }
  return embedding.logits(decoder_norm->forward(y));  // [B, T, V]
}

Seq2SeqTransformer::DecodeState Seq2SeqTransformer::start_decoding(const Tensor& memory,
                                                                   const std::vector<int64_t>& src_lengths,
                                                                   int64_t max_steps) {
  DecodeState state;
  for (const auto& layer : decoder_layers) {
    state.cross.push_back(layer->cross_attn.project_memory(memory, src_lengths));
    state.self.emplace_back(memory.size(0), max_steps, config_.d_model, config_.dtype, memory.device());
  }
  for (int64_t b = 0; b < memory.size(0); ++b) state.memory_rows.push_back(b);
  state.output_rows = embedding.output_rows();  // FixNorm's normalisation once per decode
  return state;
}

Tensor Seq2SeqTransformer::decode_step(DecodeState& state, const Tensor& tokens) {
  QKGRAD_CHECK(tokens.rank() == 1, "decode_step: tokens must be [B], got ", tokens.shape());
  check_on_device("tokens", tokens);
  Tensor y = embed_with_positions(tokens.reshape({tokens.size(0), 1}), state.step);  // [B, 1, D]
  for (std::size_t i = 0; i < decoder_layers.size(); ++i) {
    y = decoder_layers[i]->forward_step(y, state.self[i], state.cross[i], dropout_gen_);
  }
  ++state.step;
  const Tensor logits = linear(decoder_norm->forward(y), state.output_rows);  // [B, 1, V]
  return logits.reshape({logits.size(0), logits.size(2)});
}

void Seq2SeqTransformer::reorder(DecodeState& state, const Tensor& rows) const {
  NoGradGuard no_grad;
  check_on_device("rows", rows);
  const std::vector<int64_t> ids = rows.to_ids();  // on the host, for the key lengths
  for (auto& cache : state.self) cache.select_rows(rows);
  std::vector<int64_t> memory_rows;
  const auto rows_now = static_cast<int64_t>(state.memory_rows.size());
  for (int64_t r : ids) {
    QKGRAD_CHECK(r >= 0 && r < rows_now, "reorder: row ", r, " is outside the ", rows_now, " rows decoded");
    memory_rows.push_back(state.memory_rows[static_cast<std::size_t>(r)]);
  }
  if (memory_rows == state.memory_rows) return;  // every row keeps its source's memory
  state.memory_rows = memory_rows;
  for (auto& m : state.cross) {
    m.k = index_select(m.k, 0, rows);
    m.v = index_select(m.v, 0, rows);
    std::vector<int64_t> lengths;
    for (int64_t r : ids) lengths.push_back(m.key_lengths.empty() ? 0 : m.key_lengths[static_cast<std::size_t>(r)]);
    if (!m.key_lengths.empty()) m.key_lengths = lengths;
  }
}

std::vector<NamedTensor> Seq2SeqTransformer::attention_gains() const {
  std::vector<NamedTensor> gains;
  for (const auto& [name, t] : named_parameters()) {
    const bool attention = name.find("attn") != std::string::npos;
    if (attention && (name.ends_with(".g") || name.ends_with("q_norm.gamma") || name.ends_with("k_norm.gamma"))) {
      gains.emplace_back(name, t);
    }
  }
  return gains;
}

}  // namespace qkgrad
