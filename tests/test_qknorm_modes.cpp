// The query-key normalisations of today's models as modes of the attention op (issue 23):
// rms_qknorm (RMSNorm per head, learned per-dimension gains: OLMo 2, Qwen 3, Gemma 3) and
// layer_qknorm (LayerNorm per head with gain and bias: ViT-22B), then q̂k̂ᵀ/√d. Equal to their
// composition from primitive ops in value and in the gradient of every input and parameter
// (1e-10, float64); the properties that hold (scale invariance of q and k, the logit bound,
// rms_qknorm's γ_q ⊙ γ_k symmetry, layer_qknorm's inert key bias);
// the saturation that scaled dot-product shows and they do not; the KV-cache path; the errors.
// The finite-difference checks are in ops/checks/attention_cases.cpp.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/autograd.h"
#include "core/error.h"
#include "ops/ops.h"

using namespace qkgrad;
using Catch::Matchers::Contains;

namespace {

const AttentionMode kModes[] = {AttentionMode::rms_qknorm, AttentionMode::layer_qknorm};

struct Inputs {
  Tensor q, k, v;
  AttentionParams params;
  std::vector<Tensor> leaves() const {
    std::vector<Tensor> all = {q, k, v, params.q_gain, params.k_gain};
    if (params.q_bias.defined()) all.insert(all.end(), {params.q_bias, params.k_bias});
    return all;
  }
};

// q, k, v [B, T, H·d] (q and k times `scale`), gains around 1 and biases around 0, [d] or [H, d].
Inputs make_inputs(AttentionMode mode, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t d, bool per_head,
                   uint64_t seed, double scale = 1.0) {
  Generator gen(seed);
  Inputs in;
  in.q = (Tensor::randn({B, Tq, H * d}, gen, DType::f64) * scale).detach().requires_grad_();
  in.k = (Tensor::randn({B, Tk, H * d}, gen, DType::f64) * scale).detach().requires_grad_();
  in.v = Tensor::randn({B, Tk, H * d}, gen, DType::f64).requires_grad_();
  const Shape p = per_head ? Shape{H, d} : Shape{d};
  in.params.q_gain = Tensor::uniform(p, 0.5, 2.0, gen, DType::f64).requires_grad_();
  in.params.k_gain = Tensor::uniform(p, 0.5, 2.0, gen, DType::f64).requires_grad_();
  if (mode == AttentionMode::layer_qknorm) {
    in.params.q_bias = Tensor::uniform(p, -0.5, 0.5, gen, DType::f64).requires_grad_();
    in.params.k_bias = Tensor::uniform(p, -0.5, 0.5, gen, DType::f64).requires_grad_();
  }
  return in;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector(), y = b.to_vector();
  REQUIRE(x.size() == y.size());
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  return worst;
}

// The op and attention_reference on the same inputs, seed gradient and dropout stream: the
// largest difference over the output and the gradients of every leaf.
double fused_vs_composed(const Inputs& in, AttentionOptions o) {
  Generator gen_a(3), gen_b(3), seed_gen(77);
  o.generator = &gen_a;
  const Tensor fused = attention(in.q, in.k, in.v, in.params, o).out;
  const Tensor seed = Tensor::randn(fused.shape(), seed_gen, DType::f64);
  fused.backward(seed);
  std::vector<Tensor> grads;
  for (Tensor t : in.leaves()) {
    REQUIRE(t.grad().defined());
    grads.push_back(t.grad().clone());
    t.clear_grad();
  }
  o.generator = &gen_b;
  const Tensor composed = attention_reference(in.q, in.k, in.v, in.params, o).out;
  composed.backward(seed);
  double worst = max_abs_diff(fused, composed);
  std::vector<Tensor> leaves = in.leaves();
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    worst = std::max(worst, max_abs_diff(grads[i], leaves[i].grad()));
    leaves[i].clear_grad();
  }
  return worst;
}

// The largest logit difference within a row, log(p_max / p_min) over its visible keys.
double largest_logit_spread(const Tensor& probs) {
  const auto p = probs.to_vector();
  const int64_t tk = probs.size(-1);
  double worst = 0;
  for (std::size_t row = 0; row * static_cast<std::size_t>(tk) < p.size(); ++row) {
    double hi = 0, lo = INFINITY;
    for (int64_t j = 0; j < tk; ++j) {
      const double x = p[row * static_cast<std::size_t>(tk) + static_cast<std::size_t>(j)];
      hi = std::max(hi, x);
      if (x > 0) lo = std::min(lo, x);
    }
    if (hi > 0) worst = std::max(worst, std::log(hi / lo));
  }
  return worst;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : t.to_vector()) m = std::max(m, std::fabs(x));
  return m;
}

// The largest difference between the outputs with in's parameters and with `other`, on the same
// inputs and dropout stream.
double output_difference(const Inputs& in, const AttentionParams& other, AttentionOptions o) {
  NoGradGuard no_grad;
  Generator a(5), b(5);
  o.generator = &a;
  const Tensor base = attention(in.q, in.k, in.v, in.params, o).out;
  o.generator = &b;
  return max_abs_diff(attention(in.q, in.k, in.v, other, o).out, base);
}

// The op's backward from a random seed gradient, into the leaves' grad().
void backward_with_seed(const Inputs& in, AttentionOptions o) {
  Generator a(6), seed_gen(7);
  o.generator = &a;
  const Tensor out = attention(in.q, in.k, in.v, in.params, o).out;
  out.backward(Tensor::randn(out.shape(), seed_gen, DType::f64));
}

}  // namespace

TEST_CASE("rms_qknorm and layer_qknorm equal their composition in value and every gradient (1e-10)", "[attention][qknorm-modes]") {
  for (AttentionMode mode : kModes) {
    INFO(attention_mode_name(mode));
    AttentionOptions o;
    o.mode = mode;
    o.heads = 2;
    SECTION("cross-attention with padding, shared gains") {
      o.key_lengths = {5, 3, 1};
      CHECK(fused_vs_composed(make_inputs(mode, 3, 4, 5, 2, 3, false, 1), o) < 1e-10);
    }
    SECTION("causal self-attention with padding, gains per head") {
      o.causal = true;
      o.key_lengths = {6, 4};
      CHECK(fused_vs_composed(make_inputs(mode, 2, 6, 6, 2, 5, true, 2), o) < 1e-10);
    }
    SECTION("attention dropout with the same mask, several row blocks") {
      o.causal = true;
      o.dropout = 0.2;
      o.key_lengths = {40, 33};
      CHECK(fused_vs_composed(make_inputs(mode, 2, 40, 40, 2, 4, false, 3), o) < 1e-10);
    }
    SECTION("one head, d 13") {
      o.heads = 1;
      CHECK(fused_vs_composed(make_inputs(mode, 2, 3, 7, 1, 13, false, 4), o) < 1e-10);
    }
  }
}

TEST_CASE("rms_qknorm and layer_qknorm are invariant to rescaling q or k by any alpha > 0", "[attention][qknorm-modes]") {
  for (AttentionMode mode : kModes) {
    INFO(attention_mode_name(mode));
    const Inputs in = make_inputs(mode, 2, 3, 4, 2, 4, false, 5);
    AttentionOptions o;
    o.mode = mode;
    o.heads = 2;
    o.eps = 1e-20;  // eps is what breaks the invariance; far below every mean square here
    NoGradGuard no_grad;
    const Tensor base = attention(in.q, in.k, in.v, in.params, o).out;
    for (double alpha : {0.01, 3.0, 1000.0}) {
      CHECK(max_abs_diff(attention(in.q * alpha, in.k, in.v, in.params, o).out, base) < 1e-10);
      CHECK(max_abs_diff(attention(in.q, in.k * alpha, in.v, in.params, o).out, base) < 1e-10);
    }
    if (mode == AttentionMode::layer_qknorm) {  // LayerNorm also forgets a shift of every component
      CHECK(max_abs_diff(attention(in.q + 5.0, in.k - 2.0, in.v, in.params, o).out, base) < 1e-9);
    }
  }
}

TEST_CASE("the logit bounds: |S| <= sqrt(d) max|g_q| max|g_k| (rms); (sqrt(d) max|g| + |b|) products / sqrt(d) (layer)",
          "[attention][qknorm-modes]") {
  // ‖x / rms(x)‖ = √d (and ‖(x − μ)/σ‖ = √d), so ‖q̂‖ ≤ max|γ_q| √d (+ ‖β_q‖), and
  // |S_ij| = |q̂_i·k̂_j| / √d ≤ ‖q̂_i‖ ‖k̂_j‖ / √d, whatever the size of q and k. Within a row,
  // log(p_max / p_min) = S_max − S_min ≤ 2 × the bound.
  for (AttentionMode mode : kModes) {
    INFO(attention_mode_name(mode));
    const int64_t d = 8;
    for (double scale : {1.0, 1000.0}) {
      const Inputs in = make_inputs(mode, 2, 6, 6, 2, d, true, 6, scale);
      AttentionOptions o;
      o.mode = mode;
      o.heads = 2;
      o.return_probs = true;
      NoGradGuard no_grad;
      const AttentionOutput r = attention(in.q, in.k, in.v, in.params, o);
      const double root_d = std::sqrt(static_cast<double>(d));
      double bound = root_d * max_abs(in.params.q_gain) * max_abs(in.params.k_gain);
      if (mode == AttentionMode::layer_qknorm) {
        bound = (root_d * max_abs(in.params.q_gain) + root_d * max_abs(in.params.q_bias)) *
                (root_d * max_abs(in.params.k_gain) + root_d * max_abs(in.params.k_bias)) / root_d;
      }
      CHECK(largest_logit_spread(r.probs) <= 2 * bound);
    }
  }
}

TEST_CASE("rms_qknorm's logits see only the product γ_q ⊙ γ_k, so equal gains get equal gradients", "[attention][qknorm-modes]") {
  // S_ij = Σ_c γ_q,c γ_k,c q̃_ic k̃_jc / √d with q̃ = q / rms(q): (γ_q ⊙ c, γ_k / c) gives the same
  // output for any c > 0, and γ̄_q,c = Σ S̄_ij γ_k,c q̃_ic k̃_jc / √d is γ̄_k,c with γ_q,c in place of
  // γ_k,c. Gains that start equal (both 1) therefore get the same updates and stay equal.
  for (bool per_head : {false, true}) {
    INFO((per_head ? "gains per head" : "gains shared by the heads"));
    Inputs in = make_inputs(AttentionMode::rms_qknorm, 2, 5, 5, 2, 4, per_head, 12);
    AttentionOptions o;
    o.mode = AttentionMode::rms_qknorm;
    o.heads = 2;
    o.causal = true;
    o.key_lengths = {5, 3};
    o.dropout = 0.3;
    Generator c_gen(13);
    const Tensor c = Tensor::uniform(in.params.q_gain.shape(), 0.2, 5.0, c_gen, DType::f64);
    AttentionParams moved = in.params;
    moved.q_gain = (in.params.q_gain * c).detach();
    moved.k_gain = (in.params.k_gain / c).detach();
    CHECK(output_difference(in, moved, o) < 1e-12);
    in.params.k_gain = in.params.q_gain.detach().clone().requires_grad_();  // γ_k = γ_q
    backward_with_seed(in, o);
    CHECK(max_abs(in.params.q_gain.grad()) > 1e-3);  // not trivially zero
    CHECK(max_abs_diff(in.params.q_gain.grad(), in.params.k_gain.grad()) < 1e-12);
  }
}

TEST_CASE("layer_qknorm's key bias β_k has no effect: the output ignores it and its gradient is 0", "[attention][qknorm-modes]") {
  // S_ij = (γ_q ⊙ q̃_i + β_q) · (γ_k ⊙ k̃_j + β_k) / √d: the β_k term, (γ_q ⊙ q̃_i + β_q) · β_k / √d,
  // is the same for every key j of row i, and softmax forgets a constant added to a row (masked
  // keys stay at −∞). So P does not depend on β_k, and β̄_k = Σ_i q̂_i Σ_j S̄_ij / √d = 0 because
  // every row of S̄ sums to 0. (β_q matters: β_q · k̂_j varies with j.)
  for (bool per_head : {false, true}) {
    INFO((per_head ? "parameters per head" : "parameters shared by the heads"));
    const Inputs in = make_inputs(AttentionMode::layer_qknorm, 2, 5, 6, 2, 4, per_head, 14);
    AttentionOptions o;
    o.mode = AttentionMode::layer_qknorm;
    o.heads = 2;
    o.key_lengths = {6, 2};
    o.dropout = 0.3;
    Generator b_gen(15);
    AttentionParams moved = in.params;
    moved.k_bias = Tensor::uniform(in.params.k_bias.shape(), -3.0, 3.0, b_gen, DType::f64);
    CHECK(output_difference(in, moved, o) < 1e-12);
    backward_with_seed(in, o);
    CHECK(max_abs(in.params.q_bias.grad()) > 1e-3);
    CHECK(max_abs(in.params.k_bias.grad()) < 1e-12);
  }
}

TEST_CASE("saturation: scaled dot-product goes one-hot as q and k grow; every QK-norm mode stays put", "[attention][qknorm-modes]") {
  for (AttentionMode mode : {AttentionMode::scaled_dot, AttentionMode::qknorm, AttentionMode::rms_qknorm, AttentionMode::layer_qknorm}) {
    INFO(attention_mode_name(mode));
    // Each mode with its initial parameters: g = 3 (qknorm), unit gains and zero biases.
    AttentionParams params;
    if (mode == AttentionMode::qknorm) params.g = Tensor::scalar(3.0, DType::f64);
    if (normalises_heads(mode)) params.q_gain = params.k_gain = Tensor::ones({16}, DType::f64);
    if (mode == AttentionMode::layer_qknorm) params.q_bias = params.k_bias = Tensor::zeros({16}, DType::f64);
    std::vector<double> max_p;
    for (double scale : {1.0, 10.0, 100.0}) {
      const Inputs in = make_inputs(AttentionMode::rms_qknorm, 1, 8, 8, 1, 16, false, 11, scale);
      AttentionOptions o;
      o.mode = mode;
      o.heads = 1;
      o.return_probs = true;
      NoGradGuard no_grad;
      double m = 0;
      for (double p : attention(in.q, in.k, in.v, params, o).probs.to_vector()) m = std::max(m, p);
      max_p.push_back(m);
    }
    if (mode == AttentionMode::scaled_dot) {
      CHECK(max_p.back() > 0.999);  // saturated
    } else {
      CHECK(max_p.back() == Approx(max_p.front()).epsilon(1e-5));  // unchanged by the scale (but for eps)
      CHECK(max_p.back() < 0.99);
    }
  }
}

TEST_CASE("rms_qknorm and layer_qknorm over a KV cache equal the full causal computation", "[attention][qknorm-modes]") {
  for (AttentionMode mode : kModes) {
    INFO(attention_mode_name(mode));
    const int64_t T = 5, capacity = 8, H = 2, d = 3;
    const Inputs in = make_inputs(mode, 2, T, T, H, d, false, 7);
    AttentionOptions o;
    o.mode = mode;
    o.heads = H;
    o.causal = true;
    NoGradGuard no_grad;
    const Tensor full = attention(in.q, in.k, in.v, in.params, o).out;  // [2, T, H·d]
    // The cache holds the T steps and, beyond them, rows that must never be read.
    Generator junk(99);
    const Tensor keys = concat({in.k, Tensor::randn({2, capacity - T, H * d}, junk, DType::f64) * 1e6}, 1);
    const Tensor values = concat({in.v, Tensor::randn({2, capacity - T, H * d}, junk, DType::f64) * 1e6}, 1);
    for (int64_t t = 1; t <= T; ++t) {
      const Tensor step = attention_step(slice(in.q, 1, t - 1, t), keys, values, t, in.params, o).out;
      CHECK(max_abs_diff(step, slice(full, 1, t - 1, t)) < 1e-12);
    }
  }
}

TEST_CASE("rms_qknorm and layer_qknorm errors name the parameter, its shape and the rule", "[attention][qknorm-modes][errors]") {
  const Inputs in = make_inputs(AttentionMode::layer_qknorm, 1, 2, 2, 2, 3, false, 8);
  AttentionOptions o;
  o.heads = 2;
  o.mode = AttentionMode::rms_qknorm;
  AttentionParams none;
  CHECK_THROWS_WITH(attention(in.q, in.k, in.v, none, o), Contains("mode rms_qknorm needs a query gain (q_gain)"));
  AttentionParams wrong = in.params;
  wrong.q_bias = wrong.k_bias = Tensor();
  wrong.k_gain = Tensor::ones({4}, DType::f64);
  CHECK_THROWS_WITH(attention(in.q, in.k, in.v, wrong, o), Contains("a key gain (k_gain) must be [3] (shared by the heads) or [2, 3] (one per head), got [4]"));
  CHECK_THROWS_WITH(attention(in.q, in.k, in.v, in.params, o), Contains("rms_qknorm has no biases"));
  o.mode = AttentionMode::layer_qknorm;
  AttentionParams no_bias = in.params;
  no_bias.k_bias = Tensor();
  CHECK_THROWS_WITH(attention(in.q, in.k, in.v, no_bias, o), Contains("needs a key bias (k_bias)"));
  CHECK_THROWS_WITH(attention_mode_from_name("rms"), Contains("choose qknorm, scaled_dot, rms_qknorm or layer_qknorm"));
}
