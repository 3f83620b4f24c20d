// Every fused op equals the same math built from primitive ops, in value and in every gradient,
// to 1e-10 in float64.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

#include "core/autograd.h"
#include "ops/ops.h"

using namespace qkgrad;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Runs fused and composed on the same float64 inputs with the same upstream gradient, and
// returns the largest absolute difference over the value and every input gradient.
double max_difference(const Fn& fused, const Fn& composed, const std::vector<Shape>& shapes, uint64_t seed = 1) {
  Generator gen(seed);
  std::vector<Tensor> a, b;
  for (const Shape& s : shapes) {
    const Tensor x = Tensor::randn(s, gen, DType::f64);
    a.push_back(x.clone().requires_grad_());
    b.push_back(x.clone().requires_grad_());
  }
  // One forward and backward at a time: a backward consumes the whole tape.
  const Tensor ya = fused(a);
  const Tensor seed_grad = Tensor::randn(ya.shape(), gen, DType::f64);
  ya.backward(seed_grad);
  const Tensor yb = composed(b);
  REQUIRE(ya.shape() == yb.shape());
  yb.backward(seed_grad);
  double worst = 0;
  auto compare = [&](const Tensor& u, const Tensor& v) {
    const auto x = u.to_vector(), y = v.to_vector();
    REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  };
  compare(ya, yb);
  for (std::size_t i = 0; i < a.size(); ++i) compare(a[i].grad(), b[i].grad());
  return worst;
}

constexpr double kTolerance = 1e-10;

}  // namespace

TEST_CASE("fused softmax and log_softmax equal exp(x − logsumexp(x))", "[fused]") {
  CHECK(max_difference([](const auto& x) { return softmax(x[0] * 3.0); },
                       [](const auto& x) {
                         const Tensor z = x[0] * 3.0;
                         return exp(z - logsumexp(z, -1, true));
                       },
                       {{4, 7}}) < kTolerance);
  CHECK(max_difference([](const auto& x) { return log_softmax(x[0]); },
                       [](const auto& x) { return x[0] - log(sum(exp(x[0]), -1, true)); },
                       {{2, 3, 5}}) < kTolerance);
}

TEST_CASE("fused logsumexp equals log(sum(exp(x)))", "[fused]") {
  CHECK(max_difference([](const auto& x) { return logsumexp(x[0], 1); },
                       [](const auto& x) { return log(sum(exp(x[0]), 1)); }, {{3, 4, 2}}) < kTolerance);
}

TEST_CASE("fused cross-entropy with label smoothing equals its definition from log_softmax", "[fused]") {
  const int64_t v = 6;
  const Tensor targets = Tensor::from_ids({1, 0, 5, -1, 3}, {5});
  for (double eps : {0.0, 0.1, 0.3}) {
    // −Σ_rows Σ_c q_c log p_c with q = (1 − ε) onehot + ε/V, ignored rows masked out.
    auto composed = [&, eps](const std::vector<Tensor>& x) {
      std::vector<double> q(5 * v, 0.0);
      const std::vector<int64_t> t = targets.to_ids();
      for (int64_t r = 0; r < 5; ++r) {
        if (t[static_cast<std::size_t>(r)] < 0) continue;
        for (int64_t c = 0; c < v; ++c) q[static_cast<std::size_t>(r * v + c)] = eps / v + (c == t[static_cast<std::size_t>(r)] ? 1 - eps : 0);
      }
      return neg(sum(log_softmax(x[0]) * Tensor::from_vector(q, {5, v}, DType::f64)));
    };
    INFO("smoothing " << eps);
    CHECK(max_difference([&, eps](const auto& x) { return cross_entropy(x[0], targets, eps, -1).sum; }, composed,
                         {{5, v}}) < kTolerance);
  }
}

TEST_CASE("cross-entropy's z-loss equals λ·Σ logsumexp(z)² over the rows that are not ignored", "[fused]") {
  const Tensor targets = Tensor::from_ids({1, 0, 5, -1, 3}, {5});
  const Tensor kept = Tensor::from_vector({1, 1, 1, 0, 1}, {5}, DType::f64);
  for (const double lambda : {1e-4, 0.5}) {
    INFO("z-loss " << lambda);
    CHECK(max_difference([&](const auto& x) { return cross_entropy(x[0] + 1.5, targets, 0.1, -1, lambda).sum; },
                         [&](const auto& x) {
                           const Tensor lse = logsumexp(x[0] + 1.5, 1) * kept;  // [5]
                           return cross_entropy(x[0] + 1.5, targets, 0.1, -1).sum + sum(lse * lse) * lambda;
                         },
                         {{5, 6}}) < kTolerance);
  }
  CHECK_THROWS_WITH(cross_entropy(Tensor::zeros({2, 3}), Tensor::from_ids({0, 1}, {2}), 0.0, -1, -1.0),
                    Catch::Matchers::Contains("cross_entropy: z_loss must be >= 0, got -1"));
}

TEST_CASE("fused layer_norm equals (x − mean) / sqrt(var + eps) * gamma + beta", "[fused]") {
  const double eps = 1e-5;
  CHECK(max_difference([&](const auto& x) { return layer_norm(x[0], x[1], x[2], eps); },
                       [&](const auto& x) {
                         const Tensor centered = x[0] - mean(x[0], -1, true);
                         const Tensor var = mean(square(centered), -1, true);
                         return centered * rsqrt(var + eps) * x[1] + x[2];
                       },
                       {{2, 3, 8}, {8}, {8}}) < kTolerance);
}

TEST_CASE("fused rms_norm equals x / sqrt(mean(x²) + eps) * gamma", "[fused]") {
  for (const double eps : {1e-6, 0.5}) {
    INFO("eps " << eps);
    CHECK(max_difference([&](const auto& x) { return rms_norm(x[0], x[1], eps); },
                         [&](const auto& x) { return x[0] * rsqrt(mean(square(x[0]), -1, true) + eps) * x[1]; },
                         {{2, 3, 8}, {8}}) < kTolerance);
  }
}

TEST_CASE("fused l2_normalize and scale_norm equal x / norm(x) (times g)", "[fused]") {
  CHECK(max_difference([](const auto& x) { return l2_normalize(x[0]); },
                       [](const auto& x) { return x[0] / norm(x[0], -1, true); }, {{3, 5}}) < kTolerance);
  CHECK(max_difference([](const auto& x) { return scale_norm(x[0], x[1]); },
                       [](const auto& x) { return x[0] / norm(x[0], -1, true) * x[1]; }, {{2, 2, 4}, {}}) < kTolerance);
  // Below eps the fused op divides by eps: the composed version uses clamp.
  CHECK(max_difference([](const auto& x) { return l2_normalize(x[0] * 1e-3, 0.5); },
                       [](const auto& x) {
                         const Tensor z = x[0] * 1e-3;
                         return z / clamp(norm(z, -1, true), 0.5, 1e300);
                       },
                       {{2, 3}}) < kTolerance);
}

TEST_CASE("fused linear equals matmul with the transposed weight plus bias", "[fused]") {
  CHECK(max_difference([](const auto& x) { return linear(x[0], x[1], x[2]); },
                       [](const auto& x) { return matmul(x[0], transpose(x[1], 0, 1)) + x[2]; },
                       {{2, 3, 4}, {5, 4}, {5}}) < kTolerance);
  CHECK(max_difference([](const auto& x) { return matmul(x[0], x[1], false, true); },
                       [](const auto& x) { return matmul(x[0], transpose(x[1], -1, -2)); },
                       {{2, 3, 4}, {2, 5, 4}}) < kTolerance);
  CHECK(max_difference([](const auto& x) { return matmul(x[0], x[1], true, false); },
                       [](const auto& x) { return matmul(transpose(x[0], 0, 1), x[1]); },
                       {{4, 3}, {4, 2}}) < kTolerance);
}

TEST_CASE("masked_fill equals where with a scalar, and the mask gets no gradient", "[fused]") {
  const Tensor mask = Tensor::from_vector({1, 0, 0, 1, 1, 0}, {2, 3}, DType::f64);
  CHECK(max_difference([&](const auto& x) { return masked_fill(x[0], mask, 2.5); },
                       [&](const auto& x) { return x[0] * (1.0 - mask) + mask * 2.5; }, {{2, 3}}) < kTolerance);
}
