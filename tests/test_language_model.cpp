// The decoder-only language model (nn/language_model.h): causality (no position sees a later
// token), decoding a step at a time (KV caches and RoPE's positions) equal to the whole
// forward, a float64 gradient check of the whole loss in every attention mode, RoPE on and
// off, tied and separate output embeddings, parameter names, and errors.
#include <catch2/catch.hpp>

#include "core/autograd.h"
#include "core/error.h"
#include "core/gradcheck.h"
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

std::vector<double> row(const Tensor& logits, int64_t b, int64_t t) {  // logits [B, T, V]
  const int64_t T = logits.size(1), V = logits.size(2);
  const std::vector<double> all = logits.to_vector();
  return {all.begin() + (b * T + t) * V, all.begin() + (b * T + t + 1) * V};
}

}  // namespace

TEST_CASE("language model: no position sees a later token, and a step at a time equals the whole forward",
          "[language_model]") {
  for (const AttentionMode mode : kAttentionModes) {
    for (const double rope_base : {10000.0, 0.0}) {
      INFO(attention_mode_name(mode) << ", rope_base " << rope_base);
      LanguageModelConfig c = tiny_lm(mode);
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
    for (const char* tied : {"on", "off"}) {
      INFO(attention_mode_name(mode) << ", tied_embeddings " << tied);
      LanguageModelConfig c = tiny_lm(mode);
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
