// Known values: answers computed by hand or from the definitions, and the errors of the ops
// added for the Transformer.
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "core/autograd.h"
#include "core/error.h"
#include "ops/ops.h"

using namespace qkgrad;
using Catch::Matchers::Contains;

namespace {
Tensor vec(std::vector<double> v, Shape s, DType d = DType::f64) { return Tensor::from_vector(v, s, d); }
Tensor leaf(std::vector<double> v, Shape s) { return vec(v, s).requires_grad_(); }
}  // namespace

TEST_CASE("softmax is shift-invariant: softmax([1001, 998, 997]) = softmax([6, 3, 2])", "[known]") {
  for (DType dtype : {DType::f32, DType::f64}) {
    const auto big = softmax(vec({1001, 998, 997}, {1, 3}, dtype)).to_vector();
    const auto small = softmax(vec({6, 3, 2}, {1, 3}, dtype)).to_vector();
    const double z = std::exp(6.0) + std::exp(3.0) + std::exp(2.0);
    for (int i = 0; i < 3; ++i) {
      CHECK(big[static_cast<std::size_t>(i)] == Approx(small[static_cast<std::size_t>(i)]).epsilon(1e-6));
      CHECK(std::isfinite(big[static_cast<std::size_t>(i)]));
    }
    CHECK(small[0] == Approx(std::exp(6.0) / z).epsilon(1e-6));
    CHECK(log_softmax(vec({1001, 998, 997}, {3}, dtype)).at({2}) == Approx(2.0 - std::log(z)).epsilon(1e-6));
  }
}

TEST_CASE("a fully masked softmax row gives zeros, not NaN, and passes no gradient", "[known]") {
  Tensor x = leaf({1, 2, 3, 0, 0, 0}, {2, 3});
  const Tensor mask = vec({0, 0, 1, 1, 1, 1}, {2, 3});
  const Tensor y = softmax(masked_fill(x, mask, -INFINITY));
  const auto v = y.to_vector();
  CHECK(v[3] == 0);
  CHECK(v[5] == 0);
  CHECK(v[0] + v[1] == Approx(1));
  sum(y * vec({1, 2, 3, 4, 5, 6}, {2, 3})).backward();
  for (double g : x.grad().to_vector()) CHECK(std::isfinite(g));
  CHECK(x.grad().at({1, 0}) == 0);
}

TEST_CASE("label-smoothed cross-entropy of a uniform prediction is log V for any smoothing", "[known]") {
  const Tensor logits = Tensor::zeros({3, 8}, DType::f64);
  const Tensor targets = Tensor::from_ids({1, 7, 0}, {3});
  for (double eps : {0.0, 0.1, 0.5}) {
    const LossSum l = cross_entropy(logits, targets, eps);
    CHECK(l.tokens == 3);
    CHECK(l.sum.item() == Approx(3 * std::log(8.0)).epsilon(1e-12));
  }
  // A confident correct prediction without smoothing costs ~0; with smoothing it cannot.
  const Tensor sure = vec({50, 0, 0, 0}, {1, 4});
  CHECK(cross_entropy(sure, Tensor::from_ids({0}, {1})).sum.item() < 1e-20);
  CHECK(cross_entropy(sure, Tensor::from_ids({0}, {1}), 0.1).sum.item() > 1.0);
  // Ignored rows count for nothing, in the loss and in the token count.
  const LossSum ignored = cross_entropy(vec({1, 2, 3, 4}, {2, 2}), Tensor::from_ids({0, 0}, {2}), 0.0, 0);
  CHECK(ignored.tokens == 0);
  CHECK(ignored.sum.item() == 0);
  // An ignored (padding) row is not even read: a NaN there reaches neither the loss nor the
  // gradient of the other rows.
  Tensor mixed = vec({NAN, NAN, 1, 3}, {2, 2}).requires_grad_();
  const LossSum one = cross_entropy(mixed, Tensor::from_ids({0, 1}, {2}), 0.1, 0);
  CHECK(one.tokens == 1);
  CHECK(std::isfinite(one.sum.item()));
  one.sum.backward();
  CHECK(mixed.grad().at({0, 0}) == 0);
  CHECK(std::isfinite(mixed.grad().at({1, 0})));
}

TEST_CASE("layer_norm, l2_normalize, scale_norm, logsumexp, norm on hand-computed inputs", "[known]") {
  const Tensor ln = layer_norm(vec({1, 2, 3, 4}, {1, 4}), vec({1, 1, 1, 1}, {4}), vec({0, 0, 0, 0}, {4}), 1e-12);
  CHECK(ln.at({0, 0}) == Approx(-1.5 / std::sqrt(1.25)).epsilon(1e-9));
  CHECK(ln.at({0, 3}) == Approx(1.5 / std::sqrt(1.25)).epsilon(1e-9));
  CHECK(l2_normalize(vec({3, 4}, {2})).at({0}) == Approx(0.6).epsilon(1e-15));
  CHECK(l2_normalize(vec({3, 4}, {2})).at({1}) == Approx(0.8).epsilon(1e-15));
  CHECK(scale_norm(vec({3, 4}, {1, 2}), vec({2}, {})).at({0, 1}) == Approx(1.6));
  CHECK(logsumexp(vec({0, std::log(3.0)}, {2})).item() == Approx(std::log(4.0)));
  CHECK(norm(vec({3, 4}, {2})).item() == 5);
  CHECK(max(vec({1, 5, 2, 7, 0, 3}, {2, 3}), 1).to_vector() == std::vector<double>{5, 7});
}

TEST_CASE("zero vectors: norm and l2_normalize give finite values and gradients", "[known]") {
  Tensor x = leaf({0, 0, 0}, {1, 3});
  const Tensor n = norm(x, -1);
  CHECK(n.item() == 0);
  n.backward(Tensor::ones({1}, DType::f64));
  for (double g : x.grad().to_vector()) CHECK(g == 0);
  Tensor z = leaf({0, 0}, {2});
  const Tensor u = l2_normalize(z);
  CHECK(u.to_vector() == std::vector<double>{0, 0});
  sum(u * vec({1, 2}, {2})).backward();
  for (double g : z.grad().to_vector()) CHECK(std::isfinite(g));
}

TEST_CASE("max routes the gradient to the first maximum only", "[known]") {
  Tensor x = leaf({1, 3, 3, 2}, {4});
  max(x).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{0, 1, 0, 0});
}

TEST_CASE("elementwise functions at known points", "[known]") {
  const auto s = sigmoid(vec({0, -1000, 1000}, {3})).to_vector();
  CHECK(s == std::vector<double>{0.5, 0, 1});
  const auto g = gelu(vec({0, 10, -10}, {3})).to_vector();
  CHECK(g[0] == 0);
  CHECK(g[1] == Approx(10));
  CHECK(std::fabs(g[2]) < 1e-12);
  CHECK(clamp(vec({-2, 0.5, 3}, {3}), -1, 1).to_vector() == std::vector<double>{-1, 0.5, 1});
  CHECK(pow(vec({2, 9}, {2}), 0.5).at({1}) == 3);
  CHECK(rsqrt(vec({4}, {1})).item() == 0.5);
  CHECK(where(vec({1, 0}, {2}), vec({1, 2}, {2}), vec({3, 4}, {2})).to_vector() == std::vector<double>{1, 4});
  CHECK(where(Tensor::from_ids({0, 5}, {2}), vec({1, 2}, {2}), vec({3, 4}, {2})).to_vector() == std::vector<double>{3, 2});
}

TEST_CASE("sinusoidal positions: sin on even dims, cos on odd dims", "[known]") {
  const Tensor pe = sinusoidal_positions(5, 6, DType::f64);
  CHECK(pe.shape() == Shape{5, 6});
  CHECK(pe.at({0, 0}) == 0);
  CHECK(pe.at({0, 1}) == 1);
  CHECK(pe.at({1, 0}) == Approx(std::sin(1.0)));
  CHECK(pe.at({1, 1}) == Approx(std::cos(1.0)));
  CHECK(pe.at({3, 2}) == Approx(std::sin(3.0 / std::pow(10000.0, 2.0 / 6))));
  CHECK(pe.at({3, 5}) == Approx(std::cos(3.0 / std::pow(10000.0, 4.0 / 6))));
}

TEST_CASE("dropout: inverted scaling, rate, reproducible from the seed, identity when off", "[known]") {
  const Tensor x = Tensor::ones({100000});
  Generator g1(4), g2(4);
  const auto a = dropout(x, 0.3, g1).to_vector();
  const auto b = dropout(x, 0.3, g2).to_vector();
  CHECK(a == b);
  std::size_t kept = 0;
  double worst = 0;  // every kept value is 1 / (1 − p)
  for (double v : a) {
    if (v != 0) {
      ++kept;
      worst = std::max(worst, std::fabs(v - 1 / 0.7));
    }
  }
  CHECK(worst < 1e-6);
  CHECK(static_cast<double>(kept) / 1e5 == Approx(0.7).margin(0.01));
  CHECK(dropout(x, 0.3, g1).to_vector() != a);  // the generator moved on: a new mask
  CHECK(dropout(x, 0.3, g1, /*training=*/false).same(x));
  CHECK_THROWS_WITH(dropout(x, 1.0, g1), Contains("dropout: p must be in [0, 1), got 1"));
}

TEST_CASE("dropout's backward reads the forward's mask bits: the same elements kept, the same scale", "[known]") {
  // Sizes around the 32-element mask words, the 64-element i64 mask elements and the kernel's
  // 1,024-element chunks, in both float types.
  for (const DType dtype : {DType::f32, DType::f64}) {
    for (const int64_t n : {1, 31, 33, 64, 65, 1000, 1025, 70001}) {
      Generator gen(11);
      Tensor x = Tensor::ones({n}, dtype).requires_grad_();
      const Tensor y = dropout(x, 0.4, gen);
      const Tensor w = Tensor::arange(n, dtype) + 1.0;  // distinct upstream gradients
      sum(y * w).backward();
      const auto yv = y.to_vector(), wv = w.to_vector(), dx = x.grad().to_vector();
      const double scale = dtype == DType::f32 ? static_cast<double>(static_cast<float>(1.0 / 0.6)) : 1.0 / 0.6;
      int64_t wrong = 0;
      for (std::size_t i = 0; i < dx.size(); ++i) {
        const double expected = yv[i] != 0 ? (dtype == DType::f32 ? static_cast<double>(static_cast<float>(wv[i] * scale))
                                                                  : wv[i] * scale)
                                           : 0.0;
        wrong += dx[i] != expected;
      }
      INFO(dtype_name(dtype) << " n " << n);
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("word dropout replaces ids at the given rate, reproducibly", "[known]") {
  const Tensor ids = Tensor::from_ids(std::vector<int64_t>(20000, 7), {20000});
  Generator g1(9), g2(9);
  const auto a = word_dropout(ids, 0.25, 3, g1).to_ids();
  CHECK(a == word_dropout(ids, 0.25, 3, g2).to_ids());
  const auto replaced = std::count(a.begin(), a.end(), 3);
  CHECK(static_cast<double>(replaced) / 20000 == Approx(0.25).margin(0.015));
  CHECK(std::count(a.begin(), a.end(), 7) + replaced == 20000);
}

TEST_CASE("embedding reads rows and accumulates the gradient of repeated ids", "[known]") {
  Tensor w = leaf({0, 1, 10, 11, 20, 21}, {3, 2});
  const Tensor ids = Tensor::from_ids({2, 0, 2}, {3});
  const Tensor y = embedding(w, ids);
  CHECK(y.to_vector() == std::vector<double>{20, 21, 0, 1, 20, 21});
  sum(y).backward();
  CHECK(w.grad().to_vector() == std::vector<double>{1, 1, 0, 0, 2, 2});
}

TEST_CASE("data movement ops: values", "[known]") {
  const Tensor m = vec({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(transpose(m, 0, 1).to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(permute(Tensor::arange(24, DType::f64).reshape({2, 3, 4}), {2, 0, 1}).at({3, 1, 2}) == 23);
  CHECK(concat({m, vec({7, 8, 9}, {1, 3})}, 0).to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(slice(m, 1, 1, 3).to_vector() == std::vector<double>{2, 3, 5, 6});
  const auto parts = split(m, {1, 2}, 1);
  CHECK(parts[1].to_vector() == std::vector<double>{2, 3, 5, 6});
  CHECK(pad(vec({1, 2}, {2}), 0, 1, 2, -1).to_vector() == std::vector<double>{-1, 1, 2, -1, -1});
  CHECK(index_select(m, 1, Tensor::from_ids({2, 2, 0}, {3})).to_vector() == std::vector<double>{3, 3, 1, 6, 6, 4});
  CHECK(gather(m, 1, Tensor::from_ids({2, 0, 1, 1}, {2, 2})).to_vector() == std::vector<double>{3, 1, 5, 5});
}

TEST_CASE("bad indices, axes, shapes and dtypes name the op and the rule", "[known][errors]") {
  const Tensor w = Tensor::zeros({4, 3});
  CHECK_THROWS_WITH(embedding(w, Tensor::from_ids({1, 4}, {2})),
                    Contains("embedding: token id 4 at flat position 1") && Contains("out of range [0, 4)"));
  CHECK_THROWS_WITH(embedding(w, Tensor::zeros({2})), Contains("embedding: ids must be an i64 tensor"));
  CHECK_THROWS_WITH(gather(w, 1, Tensor::from_ids({0, 3, 1, 1, 1, 1, 1, 1}, {4, 2})),
                    Contains("gather: index 3") && Contains("out of range [0, 3)"));
  CHECK_THROWS_WITH(gather(w, 1, Tensor::from_ids({0, 0}, {2, 1})), Contains("gather: index [2, 1] must match x [4, 3]"));
  CHECK_THROWS_WITH(index_select(w, 2, Tensor::from_ids({0}, {1})), Contains("index_select: axis 2 is out of range"));
  CHECK_THROWS_WITH(concat({w, Tensor::zeros({4, 2})}, 0), Contains("concat: tensor 1 has shape [4, 2] but tensor 0 has [4, 3]"));
  CHECK_THROWS_WITH(slice(w, 0, 2, 5), Contains("slice: [2, 5) is not a valid range of axis 0 (size 4)"));
  CHECK_THROWS_WITH(permute(w, {0, 0}), Contains("permute: axis 0 appears twice"));
  CHECK_THROWS_WITH(layer_norm(w, Tensor::ones({4}), Tensor::zeros({4})), Contains("layer_norm: gamma [4] and beta [4] must both be [3]"));
  CHECK_THROWS_WITH(rms_norm(w, Tensor::ones({4})), Contains("rms_norm: gamma [4] must be [3] for input [4, 3]"));
  CHECK_THROWS_WITH(rms_norm(w, Tensor::ones({3}), 0.0), Contains("rms_norm: eps must be > 0, got 0"));
  CHECK_THROWS_WITH(linear(w, Tensor::zeros({5, 4})), Contains("linear: input [4, 3] does not end in the weight's in-features"));
  CHECK_THROWS_WITH(cross_entropy(w, Tensor::from_ids({0, 1, 2, 3}, {4})),
                    Contains("cross_entropy: target 3 at flat position 3 is out of range [0, 3)"));
  CHECK_THROWS_WITH(cross_entropy(w, Tensor::from_ids({0, 1}, {2})), Contains("cross_entropy: targets [2] must have shape [4]"));
  CHECK_THROWS_WITH(exp(Tensor::from_ids({1}, {1})), Contains("exp: the input is [1] i64 cpu; this op computes in f32 or f64"));
  CHECK_THROWS_WITH(matmul(w, Tensor::zeros({3, 2}, DType::f64)), Contains("matmul: dtypes differ"));
  CHECK_THROWS_WITH(clamp(w, 1, 0), Contains("clamp: low (1) must be <= high (0)"));
  CHECK_THROWS_WITH(max(Tensor::zeros({0})), Contains("max: cannot reduce over all elements"));
  CHECK_THROWS_WITH(Tensor::from_ids({1}, {1}).requires_grad_(), Contains("only f32/f64 tensors can require grad"));
}

TEST_CASE("masked classes (-inf logits) do not turn losses into NaN", "[known]") {
  const Tensor logits = vec({-INFINITY, 0, 1, 2}, {2, 2});
  const LossSum ce = cross_entropy(logits, Tensor::from_ids({1, 1}, {2}));
  CHECK(std::isfinite(ce.sum.item()));
  CHECK(ce.sum.item() == Approx(0 + std::log(1 + std::exp(-1.0))));
  Tensor lp = vec({-INFINITY, -1, -0.3, -1.2}, {2, 2}).requires_grad_();
  const LossSum n = nll(lp, Tensor::from_ids({-1, 0}, {2}), -1);
  CHECK(n.sum.item() == Approx(0.3));
  n.sum.backward();
  CHECK(lp.grad().to_vector() == std::vector<double>{0, 0, -1, 0});
}

TEST_CASE("logsumexp of an all -inf slice is -inf with a zero (not NaN) gradient", "[known]") {
  Tensor x = vec({-INFINITY, -INFINITY, 1, 2}, {2, 2}).requires_grad_();
  const Tensor y = logsumexp(x, 1);
  CHECK(y.at({0}) == -INFINITY);
  sum(y * vec({1, 1}, {2})).backward();
  const auto g = x.grad().to_vector();
  CHECK(g[0] == 0);
  CHECK(g[1] == 0);
  CHECK(g[2] + g[3] == Approx(1));
}

TEST_CASE("linear with zero input features gives the bias (and its gradient counts every row)", "[known]") {
  Tensor b = vec({1, 2, 3}, {3}).requires_grad_();
  const Tensor y = linear(Tensor::zeros({2, 0}, DType::f64), Tensor::zeros({3, 0}, DType::f64), b);
  CHECK(y.to_vector() == std::vector<double>{1, 2, 3, 1, 2, 3});
  sum(y).backward();
  CHECK(b.grad().to_vector() == std::vector<double>{2, 2, 2});
  CHECK(linear(Tensor::zeros({2, 0}), Tensor::zeros({3, 0})).to_vector() == std::vector<double>(6, 0.0));
}

TEST_CASE("reduction axes are checked for every value, and word dropout with p = 1 drops everything", "[known][errors]") {
  CHECK_THROWS_WITH(max(Tensor::zeros({2, 3}), -1000), Contains("max: axis -1000 is out of range"));
  Generator gen(1);
  const auto all = word_dropout(Tensor::from_ids({5, 6, 7, 8}, {4}), 1.0, 3, gen).to_ids();
  CHECK(all == std::vector<int64_t>{3, 3, 3, 3});
}
