// The decoder-only language model (nn/language_model.h): causality (no position sees a later
// token), decoding a step at a time (KV caches and RoPE's positions) equal to the whole
// forward, a float64 gradient check of the whole loss in every attention mode, RoPE on and
// off, tied and separate output embeddings, parameter names, and errors.
#include <catch2/catch.hpp>

#include <functional>

#include "core/autograd.h"
#include "core/error.h"
#include "core/gradcheck.h"
#include "nn/multihead_attention.h"
#include "ops/attention.h"
#include "nn/language_model.h"
#include "ops/ops.h"

using namespace qkgrad;
using Catch::Matchers::Contains;

namespace {

LanguageModelConfig tiny_lm(AttentionMode mode, DType dtype = DType::f64) {
  LanguageModelConfig c;
  c.vocab = 11;
  c.layers = 2;
  c.d_model = 8;
  c.heads = 2;
  c.ffn = 12;
  c.attention = mode;
  c.qknorm_length = 6;
  c.dtype = dtype;
  c.seed = 4;
  return c;
}

// Every way a mode normalises q and k: the fused op's (after RoPE), and before RoPE per head
// (Qwen 3), with 1 + w gains (Gemma 3), over the whole projection (OLMo 2). Modes without
// norms of their own have one form.
struct QkNormForm {
  const char* position;
  const char* scope;
  const char* gain;
};
std::vector<QkNormForm> forms_of(AttentionMode mode) {
  if (!normalises_heads(mode)) return {{"before_rope", "head", "gamma"}};
  return {{"after_rope", "head", "gamma"}, {"before_rope", "head", "gamma"}, {"before_rope", "head", "one_plus_w"},
          {"before_rope", "projection", "gamma"}};
}
LanguageModelConfig with_form(LanguageModelConfig c, const QkNormForm& f) {
  c.qk_norm_position = f.position;
  c.qk_norm_scope = f.scope;
  c.qk_gain = f.gain;
  return c;
}

std::vector<double> row(const Tensor& logits, int64_t b, int64_t t) {  // logits [B, T, V]
  const int64_t T = logits.size(1), V = logits.size(2);
  const std::vector<double> all = logits.to_vector();
  return {all.begin() + (b * T + t) * V, all.begin() + (b * T + t + 1) * V};
}

}  // namespace

TEST_CASE("language model: no position sees a later token, and a step at a time equals the whole forward",
          "[language_model]") {
  for (const AttentionMode mode : kAttentionModes) {
    for (const QkNormForm& form : forms_of(mode)) {
    for (const double rope_base : {10000.0, 0.0}) {
      INFO(attention_mode_name(mode) << " " << form.position << " " << form.scope << " " << form.gain << ", rope_base " << rope_base);
      LanguageModelConfig c = with_form(tiny_lm(mode), form);
      c.rope_base = rope_base;
      LanguageModel model(c);
      NoGradGuard no_grad;
      const Tensor ids = Tensor::from_ids({3, 7, 1, 9, 4, 5, 5, 2, 8, 0}, {2, 5});  // [B 2, T 5]
      const Tensor logits = model.forward(ids, {5, 5});                             // [2, 5, 11]
      CHECK(logits.shape() == Shape{2, 5, 11});
      // A later token changed: the logits before it are the same.
      const Tensor other = Tensor::from_ids({3, 7, 1, 6, 6, 5, 5, 2, 8, 0}, {2, 5});
      const Tensor changed = model.forward(other, {5, 5});
      for (int64_t t = 0; t < 3; ++t) CHECK(row(changed, 0, t) == row(logits, 0, t));
      CHECK(row(changed, 0, 3) != row(logits, 0, 3));
      // Decoding: the first two tokens at once, then one at a time (positions continue).
      LanguageModel::DecodeState state = model.start_decoding(2, 5);
      std::vector<Tensor> steps = {model.decode_step(state, Tensor::from_ids({3, 7, 5, 5}, {2, 2}))};
      for (const auto& [first, second] : {std::pair{1, 2}, std::pair{9, 8}, std::pair{4, 0}}) {
        steps.push_back(model.decode_step(state, Tensor::from_ids({first, second}, {2, 1})));
      }
      const Tensor decoded = concat(steps, 1);  // [2, 5, 11]
      const std::vector<double> a = decoded.to_vector(), b = logits.to_vector();
      for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-12));
    }
    }
  }
}

TEST_CASE("language model: RoPE makes the output depend on positions; without it only on the set of earlier tokens",
          "[language_model]") {
  for (const double rope_base : {10000.0, 0.0}) {
    LanguageModelConfig c = tiny_lm(AttentionMode::scaled_dot);
    c.layers = 1;  // (a second block would see the first position's different state)
    c.rope_base = rope_base;
    LanguageModel model(c);
    NoGradGuard no_grad;
    // The last position's logits after "3 7 1" and after "7 3 1": without positions attention
    // sees the same set of keys and values, so they are equal; RoPE tells the orders apart.
    const Tensor l1 = model.forward(Tensor::from_ids({3, 7, 1}, {1, 3}), {3});
    const Tensor l2 = model.forward(Tensor::from_ids({7, 3, 1}, {1, 3}), {3});
    const std::vector<double> a = row(l1, 0, 2), b = row(l2, 0, 2);
    double largest = 0;
    for (std::size_t i = 0; i < a.size(); ++i) largest = std::max(largest, std::abs(a[i] - b[i]));
    if (rope_base > 0) {
      CHECK(largest > 1e-6);
    } else {
      CHECK(largest < 1e-12);
    }
  }
}

TEST_CASE("language model: gradcheck of the whole loss in every attention mode, tied and separate output",
          "[language_model]") {
  for (const AttentionMode mode : kAttentionModes) {
    for (const QkNormForm& form : forms_of(mode)) {
    for (const char* tied : {"on", "off"}) {
      INFO(attention_mode_name(mode) << " " << form.position << " " << form.scope << " " << form.gain << ", tied_embeddings " << tied);
      LanguageModelConfig c = with_form(tiny_lm(mode), form);
      c.layers = 1;
      c.tied_embeddings = tied;
      LanguageModel model(c);
      const Tensor ids = Tensor::from_ids({3, 7, 1, 9, 4, 5, 2, 0}, {2, 4});
      const Tensor next = Tensor::from_ids({7, 1, 9, 4, 2, 8, -1, -1}, {2, 4});  // row 1: 2 real tokens
      const std::vector<Tensor> params = model.parameters();
      const GradcheckResult r = gradcheck(
          [&](const std::vector<Tensor>&) { return cross_entropy(model.forward(ids, {4, 2}), next, 0.0, -1).sum; }, params);
      for (const InputCheck& in : r.inputs) {
        if (!in.passed) INFO(model.named_parameters()[in.input].first << ": " << in.worst);
      }
      CHECK(r.passed);
      CHECK(r.inputs.size() == params.size());
    }
    }
  }
}

TEST_CASE("language model: SwiGLU and no biases, gradchecked; their parameters", "[language_model]") {
  LanguageModelConfig c = tiny_lm(AttentionMode::rms_qknorm);
  c.layers = 1;
  c.activation = "swiglu";
  c.biases = "off";
  LanguageModel model(c);
  std::vector<std::string> names;
  for (const auto& [name, t] : model.named_parameters()) names.push_back(name);
  CHECK(std::find(names.begin(), names.end(), "blocks.0.ffn.gate.weight") != names.end());
  for (const std::string& name : names) CHECK(name.find("bias") == std::string::npos);
  const Tensor ids = Tensor::from_ids({3, 7, 1, 9, 4, 5, 2, 0}, {2, 4});
  const Tensor next = Tensor::from_ids({7, 1, 9, 4, 2, 8, -1, -1}, {2, 4});
  const GradcheckResult r = gradcheck(
      [&](const std::vector<Tensor>&) { return cross_entropy(model.forward(ids, {4, 2}), next, 0.0, -1).sum; }, model.parameters());
  CHECK(r.passed);
  // The feed-forward layer is fc2(silu(fc1 x) ⊙ gate x).
  NoGradGuard no_grad;
  const FeedForward& f = model.blocks[0]->ffn;
  Generator gen(1);
  const Tensor x = Tensor::randn({1, 3, 8}, gen, DType::f64);
  const Tensor composed = f.fc2.forward(silu(f.fc1.forward(x)) * f.gate->forward(x));
  CHECK(f.forward(x, gen).to_vector() == composed.to_vector());
}

TEST_CASE("language model: parameter names, and errors naming the field", "[language_model]") {
  LanguageModelConfig c = tiny_lm(AttentionMode::rms_qknorm, DType::f32);
  c.tied_embeddings = "off";
  const LanguageModel model(c);
  std::vector<std::string> names;
  for (const auto& [name, t] : model.named_parameters()) names.push_back(name);
  for (const char* name : {"embedding.weight", "blocks.0.norm1.gamma", "blocks.1.attn.q_proj.weight",
                           "blocks.1.attn.q_norm.gamma", "blocks.0.ffn.fc2.bias", "final_norm.gamma", "output.weight"}) {
    CHECK(std::find(names.begin(), names.end(), name) != names.end());
  }
  c.heads = 3;
  CHECK_THROWS_WITH(LanguageModel(c), Contains("d_model 8 must be divisible into 3 heads"));
  c.heads = 4;  // head size 2
  c.d_model = 12;  // head size 3: odd
  CHECK_THROWS_WITH(LanguageModel(c), Contains("an even head size, got 3"));
  c.rope_base = 0;
  CHECK_NOTHROW(LanguageModel(c));
}

namespace {
// The attention of one module composed by hand: norm(·) of q and k (or none), then the
// rotation (or none), then attention_reference in `mode`.
Tensor composed_attention(const MultiHeadAttention& m, const Tensor& x, const std::function<Tensor(const Tensor&, const Tensor&)>& norm,
                          AttentionMode mode, const AttentionParams& params) {
  Tensor q = norm(m.q_proj.forward(x), m.q_gain), k = norm(m.k_proj.forward(x), m.k_gain);  // [B, T, D]
  if (m.config.rope_base > 0) {
    q = rope(q, m.config.heads, 0, m.config.rope_base);
    k = rope(k, m.config.heads, 0, m.config.rope_base);
  }
  AttentionOptions o;
  o.heads = m.config.heads;
  o.mode = mode;
  o.causal = true;
  return m.out_proj.forward(attention_reference(q, k, m.v_proj.forward(x), params, o).out);
}

double largest_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double largest = 0;
  for (std::size_t i = 0; i < x.size(); ++i) largest = std::max(largest, std::abs(x[i] - y[i]));
  return largest;
}
}  // namespace

TEST_CASE("QK norm forms: fused = composed before and after RoPE, 1 + w = gamma, OLMo 2's norm over the projection",
          "[language_model]") {
  const int64_t B = 2, T = 5, D = 8, H = 2, d = 4;
  Generator gen(11);
  const Tensor x = Tensor::randn({B, T, D}, gen, DType::f64);
  Generator noise(5);
  auto randomise = [&](Tensor& gain) {  // trained-looking gains, away from 1
    NoGradGuard no_grad;
    gain.copy_(Tensor::uniform(gain.shape(), 0.5, 1.5, noise, DType::f64));
  };
  NoGradGuard no_grad;
  for (const AttentionMode mode : {AttentionMode::rms_qknorm, AttentionMode::layer_qknorm}) {
    INFO(attention_mode_name(mode));
    const bool rms = mode == AttentionMode::rms_qknorm;
    // The composed norm of each head of [B, T, H·d] with a gain [d]: from rsqrt and mean.
    auto head_norm = [&](const Tensor& v, const Tensor& gain) {
      const Tensor heads = v.reshape({B, T, H, d});
      const Tensor centred = rms ? heads : heads - mean(heads, -1, true);
      return (centred * rsqrt(mean(square(centred), -1, true) + 1e-6) * gain).reshape({B, T, D});
    };
    auto none = [](const Tensor& v, const Tensor&) { return v; };
    Generator init_gen(3);
    AttentionConfig c{D, H, mode, 6, false, 0.0, 10000.0};
    const MultiHeadAttention after(c, InitContext{init_gen, DType::f64, Device::cpu});
    Generator init_gen2(3);
    c.norm_before_rope = true;
    const MultiHeadAttention before(c, InitContext{init_gen2, DType::f64, Device::cpu});
    // Unit gains (and zero biases): a rotation keeps a head's mean square, so RMSNorm's orders
    // agree; it does not keep the mean of a head's entries, so LayerNorm's do not.
    const double unit_gains = largest_difference(after.forward(x, x, {T, T}, true, gen), before.forward(x, x, {T, T}, true, gen));
    if (rms) {
      CHECK(unit_gains < 1e-12);
    } else {
      CHECK(unit_gains > 1e-6);
    }
    for (const MultiHeadAttention* m : {&after, &before}) {
      Tensor qg = m->q_gain, kg = m->k_gain;
      randomise(qg);
      randomise(kg);
    }
    {
      NoGradGuard copy;
      Tensor(before.q_gain).copy_(after.q_gain);
      Tensor(before.k_gain).copy_(after.k_gain);
    }
    const Tensor y_after = after.forward(x, x, {T, T}, true, gen), y_before = before.forward(x, x, {T, T}, true, gen);
    // Fused (the norm inside the op, after the rotation) = composed: rope, then the op's norm in
    // the reference. Before the rotation = the norm composed by hand (layer_qknorm's biases are
    // still 0), then rope, then scaled dot-product.
    CHECK(largest_difference(y_after, composed_attention(after, x, none, mode, after.params())) < 1e-12);
    CHECK(largest_difference(y_before, composed_attention(before, x, head_norm, AttentionMode::scaled_dot, {})) < 1e-12);
    // With trained gains the two orders are different functions.
    CHECK(largest_difference(y_after, y_before) > 1e-6);

    // Gemma 3's 1 + w: the same function as γ = 1 + w.
    Generator init_gen3(3);
    c.gain_one_plus_w = true;
    const MultiHeadAttention gemma(c, InitContext{init_gen3, DType::f64, Device::cpu});
    CHECK(gemma.q_gain.to_vector() == std::vector<double>(d, 0.0));
    Tensor(gemma.q_gain).copy_(before.q_gain - 1.0);
    Tensor(gemma.k_gain).copy_(before.k_gain - 1.0);
    CHECK(largest_difference(gemma.forward(x, x, {T, T}, true, gen), y_before) < 1e-12);

    // OLMo 2: one norm over all of q's H·d, gains [H·d].
    Generator init_gen4(3);
    c.gain_one_plus_w = false;
    c.norm_whole_projection = true;
    const MultiHeadAttention olmo(c, InitContext{init_gen4, DType::f64, Device::cpu});
    CHECK(olmo.q_gain.shape() == Shape{D});
    Tensor qg = olmo.q_gain, kg = olmo.k_gain;
    randomise(qg);
    randomise(kg);
    auto projection_norm = [&](const Tensor& v, const Tensor& gain) {
      const Tensor centred = rms ? v : v - mean(v, -1, true);
      return centred * rsqrt(mean(square(centred), -1, true) + 1e-6) * gain;
    };
    CHECK(largest_difference(olmo.forward(x, x, {T, T}, true, gen),
                             composed_attention(olmo, x, projection_norm, AttentionMode::scaled_dot, {})) < 1e-12);
    c.norm_before_rope = false;
    Generator init_gen5(3);
    CHECK_THROWS_WITH(MultiHeadAttention(c, InitContext{init_gen5, DType::f64, Device::cpu}), Contains("before the rotation"));
  }
}
