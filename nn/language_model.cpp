#include "nn/language_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/autograd.h"
#include "core/error.h"
#include "ops/ops.h"

namespace qkgrad {

void LanguageModelConfig::validate() const {
  QKGRAD_CHECK(vocab >= 2, "LanguageModelConfig: vocab must be >= 2, got ", vocab);
  QKGRAD_CHECK(layers >= 1, "LanguageModelConfig: layers must be >= 1, got ", layers);
  QKGRAD_CHECK(d_model >= 1 && heads >= 1 && d_model % heads == 0, "LanguageModelConfig: d_model ", d_model,
               " must be divisible into ", heads, " heads");
  QKGRAD_CHECK(rope_base == 0 || (rope_base > 1 && (d_model / heads) % 2 == 0), "LanguageModelConfig: RoPE (rope_base ",
               rope_base, ") needs a base > 1 and an even head size, got ", d_model / heads, " (rope_base 0: no RoPE)");
  QKGRAD_CHECK(ffn >= 1, "LanguageModelConfig: ffn must be >= 1, got ", ffn);
  for (const auto& [name, p] : {std::pair{"dropout", dropout}, std::pair{"attention_dropout", attention_dropout}}) {
    QKGRAD_CHECK(p >= 0 && p < 1, "LanguageModelConfig: ", name, " must be in [0, 1), got ", p);
  }
  QKGRAD_CHECK(attention != AttentionMode::qknorm || qknorm_length > 1,
               "LanguageModelConfig: qknorm_length (L) must be > 1, got ", qknorm_length);
  QKGRAD_CHECK(is_floating(dtype), "LanguageModelConfig: dtype must be f32 or f64");
  QKGRAD_CHECK(qk_norm_scope == "head" || qk_norm_position == "before_rope", "LanguageModelConfig: a QK norm over the "
               "whole projection (qk_norm_scope projection, OLMo 2) comes before the rotation (qk_norm_position before_rope)");
  const bool default_form = qk_norm_position == "before_rope" && qk_norm_scope == "head" && qk_gain == "gamma";
  QKGRAD_CHECK(normalises_heads(attention) || default_form, "LanguageModelConfig: qk_norm_position, qk_norm_scope and "
               "qk_gain shape the norms of rms_qknorm and layer_qknorm; attention ", attention_mode_name(attention),
               " has none (leave them at before_rope, head, gamma)");
}

namespace {
AttentionConfig attention_config(const LanguageModelConfig& c) {
  AttentionConfig a;
  a.dim = c.d_model;
  a.heads = c.heads;
  a.mode = c.attention;
  a.qknorm_length = c.qknorm_length;
  a.dropout = c.attention_dropout;
  a.rope_base = c.rope_base;
  a.norm_before_rope = c.qk_norm_position == "before_rope";
  a.norm_whole_projection = c.qk_norm_scope == "projection";
  a.gain_one_plus_w = c.qk_gain == "one_plus_w";
  a.bias = c.biases == "on";
  return a;
}
}  // namespace

// ---- a block ----

DecoderBlock::DecoderBlock(const LanguageModelConfig& c, const InitContext& init)
    : norm1(make_norm(c.norm, c.d_model, init)),
      norm2(make_norm(c.norm, c.d_model, init)),
      attn(attention_config(c), init),
      ffn(c.d_model, c.ffn, 0.0, init, c.activation, c.biases == "on"),
      dropout_p(c.dropout) {
  register_module("norm1", *norm1);
  register_module("attn", attn);
  register_module("norm2", *norm2);
  register_module("ffn", ffn);
}

Tensor DecoderBlock::forward(const Tensor& x, const std::vector<int64_t>& lengths, Generator& gen) const {
  const Tensor n1 = norm1->forward(x);                                                            // [B, T, D]
  const Tensor h = x + dropout(attn.forward(n1, n1, lengths, /*causal=*/true, gen), dropout_p, gen, training());
  return h + dropout(ffn.forward(norm2->forward(h), gen), dropout_p, gen, training());
}

Tensor DecoderBlock::forward_step(const Tensor& x_step, KVCache& cache, Generator& gen) const {
  const Tensor h = x_step + attn.forward_step(norm1->forward(x_step), cache, gen);  // [B, t, D]
  return h + ffn.forward(norm2->forward(h), gen);
}

// ---- the model ----

LanguageModel::LanguageModel(const LanguageModelConfig& c, Device device)
    : config_((c.validate(), c)),
      init_gen_(c.seed, /*stream=*/1),
      dropout_gen_(c.seed, /*stream=*/2),
      init_{init_gen_, c.dtype, device},
      embedding(c.vocab, c.d_model, /*fixnorm=*/false, init_) {
  register_module("embedding", embedding);
  for (int64_t i = 0; i < c.layers; ++i) {
    blocks.push_back(std::make_unique<DecoderBlock>(c, init_));
    register_module("blocks." + std::to_string(i), *blocks.back());
  }
  final_norm = make_norm(c.norm, c.d_model, init_);
  register_module("final_norm", *final_norm);
  if (c.tied_embeddings == "off") {
    output = std::make_unique<Linear>(c.d_model, c.vocab, /*bias=*/false, 1.0 / std::sqrt(static_cast<double>(c.d_model)),
                                      init_);
    register_module("output", *output);
  }
}

Tensor LanguageModel::logits(const Tensor& x) const {
  const Tensor n = final_norm->forward(x);  // [B, T, D]
  return output ? output->forward(n) : embedding.logits(n);  // [B, T, V]
}

Tensor LanguageModel::forward(const Tensor& ids, const std::vector<int64_t>& lengths) {
  QKGRAD_CHECK(ids.rank() == 2, "LanguageModel: ids must be [B, T] token ids, got ", ids.shape());
  QKGRAD_CHECK(ids.device() == device(), "LanguageModel: ids are on ", device_name(ids.device()), ", the model on ",
               device_name(device()));
  Tensor x = dropout(embedding.embed(ids), config_.dropout, dropout_gen_, training());  // [B, T, D]
  for (const auto& block : blocks) x = block->forward(x, lengths, dropout_gen_);
  return logits(x);
}

LanguageModel::DecodeState LanguageModel::start_decoding(int64_t batch, int64_t max_tokens) const {
  DecodeState state;
  for (std::size_t i = 0; i < blocks.size(); ++i) state.caches.emplace_back(batch, max_tokens, config_.d_model, config_.dtype, device());
  return state;
}

Tensor LanguageModel::decode_step(DecodeState& state, const Tensor& tokens) {
  QKGRAD_CHECK(tokens.rank() == 2, "LanguageModel::decode_step: tokens must be [B, t] token ids, got ", tokens.shape());
  QKGRAD_CHECK(state.caches.size() == blocks.size(), "LanguageModel::decode_step: the state has ", state.caches.size(),
               " caches for ", blocks.size(), " blocks (make it with start_decoding)");
  Tensor x = embedding.embed(tokens);  // [B, t, D]
  for (std::size_t i = 0; i < blocks.size(); ++i) x = blocks[i]->forward_step(x, state.caches[i], dropout_gen_);
  return logits(x);  // [B, t, V]
}

// ---- watching the attention ----

namespace {
// max |S_ij| over the finite entries of logits [B, H, T, T] of the real queries (i < lengths[b]),
// and the mean entropy of their softmax rows.
LanguageModel::AttentionProbe probe_logits(const Tensor& logits, const std::vector<int64_t>& lengths) {
  const std::vector<double> S = logits.to_vector();
  const int64_t H = logits.size(1), T = logits.size(3), rows = logits.numel() / T;
  LanguageModel::AttentionProbe p;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (r % T >= lengths[r / (H * T)]) continue;  // a padding query
    const double* row = S.data() + r * T;
    double top = -INFINITY;
    for (int64_t j = 0; j < T; ++j) {
      if (std::isfinite(row[j])) {
        top = std::max(top, row[j]);
        p.max_logit = std::max(p.max_logit, std::abs(row[j]));
      }
    }
    if (!std::isfinite(top)) continue;  // no visible key
    double z = 0, weighted = 0;  // H = ln Z − Σ e^(s−top) (s − top) / Z, with Z = Σ e^(s−top)
    for (int64_t j = 0; j < T; ++j) {
      if (!std::isfinite(row[j])) continue;
      const double e = std::exp(row[j] - top);
      z += e;
      weighted += e * (row[j] - top);
    }
    p.mean_entropy += std::log(z) - weighted / z;
    ++counted;
  }
  p.mean_entropy /= static_cast<double>(std::max<int64_t>(counted, 1));
  return p;
}
}  // namespace

std::vector<LanguageModel::AttentionProbe> LanguageModel::probe_attention(const Tensor& ids, const std::vector<int64_t>& lengths) {
  // The model is in eval mode, and its blocks record their logits, for this call only, whatever throws.
  const EvalMode eval_mode(*this);
  struct StopRecording {
    std::vector<std::unique_ptr<DecoderBlock>>& blocks;
    ~StopRecording() {
      for (auto& b : blocks) {
        b->attn.record_logits = false;
        b->attn.last_logits = Tensor();
      }
    }
  } stop_recording{blocks};
  NoGradGuard no_grad;
  for (auto& b : blocks) b->attn.record_logits = true;
  (void)forward(ids, lengths);
  std::vector<AttentionProbe> probes;
  for (auto& b : blocks) probes.push_back(probe_logits(b->attn.last_logits, lengths));
  return probes;
}

}  // namespace qkgrad
