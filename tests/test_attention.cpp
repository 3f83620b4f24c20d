// The fused attention op: equal to its composition from primitive ops (values and every
// gradient, 1e-10 in float64), the properties QKNorm is about, the incremental path, masked
// rows and zero vectors, and its errors. The finite-difference checks are in
// ops/checks/attention_cases.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "nn/kv_cache.h"
#include "ops/ops.h"

using namespace qkgrad;
using Catch::Matchers::Contains;

namespace {

struct Inputs {
  Tensor q, k, v, g;
};

Inputs make_inputs(int64_t B, int64_t Tq, int64_t Tk, int64_t width, Shape g_shape, uint64_t seed,
                   double scale = 1.0) {
  Generator gen(seed);
  Inputs in;
  in.q = (Tensor::randn({B, Tq, width}, gen, DType::f64) * scale).detach().requires_grad_();
  in.k = (Tensor::randn({B, Tk, width}, gen, DType::f64) * scale).detach().requires_grad_();
  in.v = Tensor::randn({B, Tk, width}, gen, DType::f64).requires_grad_();
  in.g = (Tensor::uniform(g_shape, 2.0, 5.0, gen, DType::f64)).requires_grad_();
  return in;
}

std::vector<Tensor> leaves(const Inputs& in) { return {in.q, in.k, in.v, in.g}; }

void clear(const Inputs& in) {
  for (Tensor t : leaves(in)) t.clear_grad();
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector(), y = b.to_vector();
  REQUIRE(x.size() == y.size());
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isinf(x[i]) && x[i] == y[i]) continue;
    worst = std::max(worst, std::fabs(x[i] - y[i]));
  }
  return worst;
}

// Fused and composed on the same inputs, seed gradient and dropout stream: returns the largest
// difference over the output and the gradients of q, k, v (and g for qknorm).
double fused_vs_composed(const Inputs& in, AttentionOptions o, uint64_t dropout_seed = 3) {
  Generator gen_a(dropout_seed), gen_b(dropout_seed);
  Generator seed_gen(77);
  o.generator = &gen_a;
  const Tensor fused = attention(in.q, in.k, in.v, in.g, o).out;
  const Tensor seed = Tensor::randn(fused.shape(), seed_gen, DType::f64);
  fused.backward(seed);
  std::vector<Tensor> fused_grads;
  for (const Tensor& t : leaves(in)) fused_grads.push_back(t.grad().defined() ? t.grad().clone() : Tensor());
  clear(in);
  o.generator = &gen_b;
  const Tensor composed = attention_reference(in.q, in.k, in.v, in.g, o).out;
  composed.backward(seed);
  double worst = max_abs_diff(fused, composed);
  const std::vector<Tensor> ls = leaves(in);
  for (std::size_t i = 0; i < ls.size(); ++i) {
    const bool qk_gain = i == 3;
    if (qk_gain && o.mode == AttentionMode::scaled_dot) continue;
    REQUIRE(fused_grads[i].defined());
    worst = std::max(worst, max_abs_diff(fused_grads[i], ls[i].grad()));
  }
  clear(in);
  return worst;
}

}  // namespace

TEST_CASE("fused attention equals the composed reference in value and every gradient (1e-10)", "[attention]") {
  for (AttentionMode mode : {AttentionMode::qknorm, AttentionMode::scaled_dot}) {
    AttentionOptions o;
    o.mode = mode;
    o.heads = 2;
    SECTION("cross-attention with padding") {
      o.key_lengths = {5, 3, 1};
      CHECK(fused_vs_composed(make_inputs(3, 4, 5, 6, {}, 1), o) < 1e-10);
    }
    SECTION("causal self-attention with padding") {
      o.causal = true;
      o.key_lengths = {6, 4};
      CHECK(fused_vs_composed(make_inputs(2, 6, 6, 10, {}, 2), o) < 1e-10);
    }
    SECTION("attention dropout with the same mask") {
      o.dropout = 0.25;
      o.causal = true;
      CHECK(fused_vs_composed(make_inputs(2, 5, 5, 8, {}, 3), o) < 1e-10);
    }
    SECTION("causal over several row blocks (T 70: the CPU kernel's blocks of 32 rows), padding, dropout") {
      // Key lengths 70, 33 and 0: full rows, rows whose last blocks see the same 33 keys, and
      // blocks with no visible key at all (empty products).
      o.causal = true;
      o.dropout = 0.1;
      o.key_lengths = {70, 33, 0};
      CHECK(fused_vs_composed(make_inputs(3, 70, 70, 8, {}, 11), o) < 1e-10);
    }
    SECTION("one head, d not a multiple of the SIMD width") {
      o.heads = 1;
      CHECK(fused_vs_composed(make_inputs(2, 3, 7, 13, {1}, 4), o) < 1e-10);
    }
  }
  AttentionOptions per_head;
  per_head.heads = 4;
  per_head.causal = true;
  CHECK(fused_vs_composed(make_inputs(2, 5, 5, 12, {4}, 5), per_head) < 1e-10);
}

TEST_CASE("qknorm: every logit lies in [-g, g], so probabilities are bounded away from 0 and 1", "[attention]") {
  // Huge q and k: scaled dot-product would be one-hot; QKNorm's logits stay within ±g.
  const Inputs in = make_inputs(2, 6, 9, 8, {}, 6, /*scale=*/100.0);
  AttentionOptions o;
  o.heads = 2;
  o.return_probs = true;
  const double g = in.g.item();
  const auto p = attention(in.q, in.k, in.v, in.g, o).probs.to_vector();
  const int64_t tk = 9;
  for (std::size_t row = 0; row < p.size() / tk; ++row) {
    double lo = 1, hi = 0, total = 0;
    for (int64_t j = 0; j < tk; ++j) {
      const double x = p[row * tk + static_cast<std::size_t>(j)];
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      total += x;
    }
    CHECK(total == Approx(1).epsilon(1e-12));
    CHECK(hi / lo <= std::exp(2 * g) * (1 + 1e-12));  // logits differ by at most 2g
    CHECK(hi <= std::exp(g) / (std::exp(g) + (tk - 1) * std::exp(-g)) + 1e-12);
  }
}

TEST_CASE("qknorm is invariant to rescaling q or k by any alpha > 0", "[attention]") {
  const Inputs in = make_inputs(2, 3, 4, 6, {}, 7);
  AttentionOptions o;
  o.heads = 3;
  NoGradGuard no_grad;
  const Tensor base = attention(in.q, in.k, in.v, in.g, o).out;
  for (double alpha : {1e-3, 0.5, 7.0, 1e4}) {
    CHECK(max_abs_diff(attention(in.q * alpha, in.k, in.v, in.g, o).out, base) < 1e-12);
    CHECK(max_abs_diff(attention(in.q, in.k * alpha, in.v, in.g, o).out, base) < 1e-12);
  }
}

TEST_CASE("qknorm: the gradient of each query row is orthogonal to that row", "[attention]") {
  const Inputs in = make_inputs(2, 4, 5, 6, {}, 8);
  AttentionOptions o;
  o.heads = 2;
  o.causal = true;
  const Tensor out = attention(in.q, in.k, in.v, in.g, o).out;
  Generator gen(1);
  out.backward(Tensor::randn(out.shape(), gen, DType::f64));
  const auto q = in.q.to_vector(), dq = in.q.grad().to_vector(), dk = in.k.grad().to_vector(), k = in.k.to_vector();
  double worst = 0, scale = 0;
  for (std::size_t row = 0; row < q.size() / 3; ++row) {  // rows of one head: 3 values each
    double dot = 0, dot_k = 0;
    for (std::size_t c = 0; c < 3; ++c) {
      dot += q[row * 3 + c] * dq[row * 3 + c];
      scale = std::max(scale, std::fabs(dq[row * 3 + c]));
    }
    if (row < k.size() / 3) {
      for (std::size_t c = 0; c < 3; ++c) dot_k += k[row * 3 + c] * dk[row * 3 + c];
    }
    worst = std::max({worst, std::fabs(dot), std::fabs(dot_k)});
  }
  CHECK(scale > 1e-3);  // the gradient is not trivially zero
  CHECK(worst < 1e-12);
}

TEST_CASE("incremental decoding with a KV cache equals the full causal computation", "[attention]") {
  for (AttentionMode mode : {AttentionMode::qknorm, AttentionMode::scaled_dot}) {
    const int64_t B = 2, T = 6, W = 8;
    const Inputs in = make_inputs(B, T, T, W, {}, 9);
    AttentionOptions o;
    o.heads = 2;
    o.mode = mode;
    o.causal = true;
    NoGradGuard no_grad;
    const Tensor full = attention(in.q, in.k, in.v, in.g, o).out;  // [B, T, W]
    KVCache cache(B, /*capacity=*/10, W, DType::f64);
    for (int64_t t = 0; t < T; ++t) {
      cache.append(slice(in.k, 1, t, t + 1), slice(in.v, 1, t, t + 1));
      const Tensor step = attention_step(slice(in.q, 1, t, t + 1), cache, in.g, o).out;  // [B, 1, W]
      CHECK(max_abs_diff(step, slice(full, 1, t, t + 1)) < 1e-12);
    }
    // Two steps at once (a prefix) agree too.
    KVCache prefix(B, 10, W, DType::f64);
    prefix.append(slice(in.k, 1, 0, 4), slice(in.v, 1, 0, 4));
    CHECK(max_abs_diff(attention_step(slice(in.q, 1, 2, 4), prefix, in.g, o).out, slice(full, 1, 2, 4)) < 1e-12);
  }
}

TEST_CASE("a KV cache's select_rows keeps, repeats and drops batch entries with their steps", "[attention]") {
  const int64_t B = 3, T = 4, W = 4;
  const Inputs in = make_inputs(B, T, T, W, {}, 11);
  NoGradGuard no_grad;
  KVCache cache(B, /*capacity=*/6, W, DType::f64);
  cache.append(slice(in.k, 1, 0, 3), slice(in.v, 1, 0, 3));
  cache.select_rows(Tensor::from_ids({2, 0, 2, 1}, {4}));  // more rows: repeats
  REQUIRE(cache.keys().shape() == Shape{4, 6, W});
  const Tensor used = slice(cache.keys(), 1, 0, 3);  // [4, 3, W]: the steps in use
  CHECK(max_abs_diff(used, index_select(slice(in.k, 1, 0, 3), 0, Tensor::from_ids({2, 0, 2, 1}, {4}))) == 0);
  cache.select_rows(Tensor::from_ids({3, 0}, {2}));  // fewer rows: old rows 1 and 2
  REQUIRE(cache.keys().shape() == Shape{2, 6, W});
  CHECK(cache.length() == 3);
  // Appending and attending go on with the new rows: row 0 is entry 1, row 1 is entry 2.
  const Tensor rows = Tensor::from_ids({1, 2}, {2});
  const Tensor k4 = index_select(slice(in.k, 1, 3, 4), 0, rows), v4 = index_select(slice(in.v, 1, 3, 4), 0, rows);
  cache.append(k4, v4);
  AttentionOptions o;
  o.heads = 2;
  const Tensor q = index_select(slice(in.q, 1, 3, 4), 0, rows);  // [2, 1, W]
  const Tensor want = attention(q, index_select(in.k, 0, rows), index_select(in.v, 0, rows), in.g, o).out;
  CHECK(max_abs_diff(attention_step(q, cache, in.g, o).out, want) < 1e-12);
  CHECK_THROWS_WITH(cache.select_rows(Tensor::from_ids({0, 2}, {2})),
                    Contains("KVCache::select_rows: row 2 at flat position 1") && Contains("the cache holds 2 batch entries"));
  CHECK_THROWS_WITH(cache.select_rows(Tensor::from_ids({0, 1}, {1, 2})), Contains("KVCache::select_rows: rows must be 1-D"));
}

TEST_CASE("a KV cache's storage grows with the steps appended, up to its capacity", "[attention]") {
  const int64_t B = 2, T = 40, W = 4;
  const Inputs in = make_inputs(B, T, T, W, {}, 12);
  AttentionOptions o;
  o.heads = 2;
  o.causal = true;
  NoGradGuard no_grad;
  const Tensor full = attention(in.q, in.k, in.v, in.g, o).out;  // [B, T, W]
  KVCache cache(B, /*capacity=*/T, W, DType::f64);
  for (int64_t t = 0; t < T; t += 3) {  // 3 steps at a time (the last append: 1), a reorder between
    const int64_t end = std::min(T, t + 3);
    cache.append(slice(in.k, 1, t, end), slice(in.v, 1, t, end));
    CHECK(cache.keys().size(1) >= end);
    CHECK(cache.keys().size(1) <= T);
    CHECK(max_abs_diff(attention_step(slice(in.q, 1, t, end), cache, in.g, o).out, slice(full, 1, t, end)) < 1e-12);
    cache.select_rows(Tensor::from_ids({0, 1}, {2}));
  }
  CHECK(cache.length() == T);
  CHECK(cache.capacity() == T);
  CHECK_THROWS_WITH(cache.append(slice(in.k, 1, 0, 1), slice(in.v, 1, 0, 1)), Contains("exceed the capacity of 40"));
}

TEST_CASE("fully masked rows and zero vectors give finite results and finite gradients", "[attention]") {
  for (AttentionMode mode : {AttentionMode::qknorm, AttentionMode::scaled_dot}) {
    Inputs in = make_inputs(2, 3, 4, 4, {}, 10);
    {
      NoGradGuard no_grad;
      in.q.set({0, 1, 0}, 0), in.q.set({0, 1, 1}, 0), in.q.set({0, 1, 2}, 0), in.q.set({0, 1, 3}, 0);  // a zero query
      for (int64_t c = 0; c < 4; ++c) in.k.set({1, 2, c}, 0);                                       // a zero key
    }
    AttentionOptions o;
    o.mode = mode;
    o.heads = 1;
    o.key_lengths = {0, 4};  // batch entry 0 sees no key at all
    o.return_probs = true;
    const AttentionOutput r = attention(in.q, in.k, in.v, in.g, o);
    for (double x : r.out.to_vector()) CHECK(std::isfinite(x));
    CHECK(slice(r.out, 0, 0, 1).to_vector() == std::vector<double>(12, 0.0));  // defined as 0
    CHECK(slice(r.probs, 0, 0, 1).to_vector() == std::vector<double>(12, 0.0));
    r.out.backward(Tensor::ones(r.out.shape(), DType::f64));
    for (const Tensor& t : leaves(in)) {
      if (mode == AttentionMode::scaled_dot && t.same(in.g)) continue;
      for (double x : t.grad().to_vector()) CHECK(std::isfinite(x));
    }
  }
}

TEST_CASE("saturation: scaled dot-product goes one-hot and its gradient vanishes; QKNorm stays bounded", "[attention]") {
  // As q and k grow, scaled dot-product logits grow with them: the softmax saturates, the
  // largest probability goes to 1 and the gradient reaching q and k goes to 0. QKNorm's
  // logits stay within ±g whatever the norms, so its probabilities and gradients stay put.
  AttentionOptions o;
  o.heads = 1;
  o.return_probs = true;
  std::vector<double> sdp_max_p, sdp_grad, qk_max_p, qk_grad;
  for (double scale : {1.0, 10.0, 100.0}) {
    const Inputs in = make_inputs(1, 8, 8, 16, {}, 11, scale);
    for (AttentionMode mode : {AttentionMode::scaled_dot, AttentionMode::qknorm}) {
      o.mode = mode;
      const AttentionOutput r = attention(in.q, in.k, in.v, in.g, o);
      double max_p = 0;
      for (double p : r.probs.to_vector()) max_p = std::max(max_p, p);
      r.out.backward(Tensor::ones(r.out.shape(), DType::f64));
      // The gradient through the logits, measured at the keys (scale-free for QKNorm: ‖k‖·‖dk‖).
      const double grad = norm(in.k.grad()).item() * scale;
      (mode == AttentionMode::scaled_dot ? sdp_max_p : qk_max_p).push_back(max_p);
      (mode == AttentionMode::scaled_dot ? sdp_grad : qk_grad).push_back(grad);
      clear(in);
    }
  }
  CHECK(sdp_max_p.back() > 0.999);               // saturated
  CHECK(sdp_grad.back() < 1e-3 * sdp_grad.front());  // the gradient has vanished
  CHECK(qk_max_p.back() == Approx(qk_max_p.front()).epsilon(1e-9));  // unchanged by the scale
  CHECK(qk_grad.back() == Approx(qk_grad.front()).epsilon(1e-6));
  CHECK(qk_max_p.back() < 0.99);
}

TEST_CASE("attention is deterministic across thread counts", "[attention]") {
  const Inputs in = make_inputs(4, 16, 16, 32, {}, 12);
  AttentionOptions o;
  o.heads = 4;
  o.causal = true;
  const int threads = num_threads();
  std::vector<std::vector<double>> results;
  for (int t : {1, std::max(2, threads)}) {
    set_num_threads(t);
    const Tensor out = attention(in.q, in.k, in.v, in.g, o).out;
    out.backward(Tensor::ones(out.shape(), DType::f64));
    std::vector<double> all = out.to_vector();
    for (const Tensor& x : leaves(in)) {
      const auto g = x.grad().to_vector();
      all.insert(all.end(), g.begin(), g.end());
    }
    results.push_back(all);
    clear(in);
  }
  set_num_threads(threads);
  CHECK(results[0] == results[1]);
}

TEST_CASE("the paper's initial gain: g0 = log2(L^2 - L)", "[attention]") {
  CHECK(qknorm_initial_g(72) == Approx(std::log2(72.0 * 71.0)));  // 12.32, "about 12.3"
  CHECK(qknorm_initial_g(72) == Approx(12.3).margin(0.05));
  CHECK_THROWS_WITH(qknorm_initial_g(1), Contains("must be > 1"));
}

TEST_CASE("attention errors name the shapes and the rule", "[attention][errors]") {
  const Tensor q = Tensor::zeros({2, 3, 8}), k = Tensor::zeros({2, 4, 8}), g = Tensor::ones({});
  AttentionOptions o;
  o.heads = 3;
  CHECK_THROWS_WITH(attention(q, k, k, g, o), Contains("attention: the width 8 of q is not divisible into 3 heads"));
  o.heads = 2;
  CHECK_THROWS_WITH(attention(q, k, Tensor::zeros({2, 5, 8}), g, o), Contains("k [2, 4, 8] and v [2, 5, 8] must have the same shape"));
  CHECK_THROWS_WITH(attention(q, Tensor::zeros({3, 4, 8}), Tensor::zeros({3, 4, 8}), g, o),
                    Contains("must agree in batch size and width"));
  CHECK_THROWS_WITH(attention(q, k, k, Tensor::ones({3}), o), Contains("g must be a scalar ([] or [1]) or one value per head ([2]), got [3]"));
  o.key_lengths = {4};
  CHECK_THROWS_WITH(attention(q, k, k, g, o), Contains("1 key lengths given for a batch of 2"));
  o.key_lengths = {4, 5};
  CHECK_THROWS_WITH(attention(q, k, k, g, o), Contains("key length 5 of batch entry 1 is outside [0, 4]"));
  o.key_lengths = {};
  o.kv_length = -5;
  CHECK_THROWS_WITH(attention(q, k, k, g, o), Contains("kv_length -5 must be -1 (all) or in [0, 4]"));
  o.kv_length = -1;
  o.dropout = 0.1;
  CHECK_THROWS_WITH(attention(q, k, k, g, o), Contains("dropout > 0 needs a generator"));
  KVCache cache(2, 2, 8);
  CHECK_THROWS_WITH(cache.append(Tensor::zeros({2, 3, 8}), Tensor::zeros({2, 3, 8})), Contains("exceed the capacity of 2"));
}
