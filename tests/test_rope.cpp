// RoPE (ops/rope.cpp): the rotation against the formula computed element by element on the
// host, the properties it exists for (norms kept, q·k depending only on the distance of the
// positions), the first position of a decoding step, and errors naming the op and the shape.
// Its backward is proven by the gradient checks (ops/checks/attention_cases.cpp).
#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.h"
#include "core/generator.h"
#include "ops/ops.h"

using namespace qkgrad;
using Catch::Matchers::Contains;

namespace {

// y[b, t, h·d + i] by the formula, in double: the pair (i, i + m) turned by (first + t)·θᵢ.
std::vector<double> rope_by_hand(const Tensor& x, int64_t H, int64_t first, double base) {
  const int64_t B = x.shape()[0], T = x.shape()[1], D = x.shape()[2], d = D / H, m = d / 2;
  const std::vector<double> v = x.to_vector();
  std::vector<double> y(v.size());
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t row = (b * T + t) * D + h * d;
        for (int64_t i = 0; i < m; ++i) {
          const double angle = static_cast<double>(first + t) * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d));
          const double a = v[row + i], c = v[row + i + m];
          y[row + i] = a * std::cos(angle) - c * std::sin(angle);
          y[row + i + m] = c * std::cos(angle) + a * std::sin(angle);
        }
      }
    }
  }
  return y;
}

double dot(const std::vector<double>& a, int64_t i, const std::vector<double>& b, int64_t j, int64_t n) {
  double s = 0;
  for (int64_t k = 0; k < n; ++k) s += a[i + k] * b[j + k];
  return s;
}

}  // namespace

TEST_CASE("rope: each head's pairs (i, i + d/2) turned by position times base^(-2i/d)", "[rope]") {
  Generator gen(7);
  for (const auto& [H, d, first, base] : {std::tuple{2, 4, int64_t{0}, 10000.0}, std::tuple{1, 6, int64_t{5}, 100.0},
                                          std::tuple{3, 8, int64_t{1000}, 10000.0}}) {
    INFO("H " << H << ", d " << d << ", first " << first << ", base " << base);
    const Tensor x = Tensor::randn({2, 3, H * d}, gen, DType::f64);  // [B, T, H·d]
    const std::vector<double> y = rope(x, H, first, base).to_vector(), expected = rope_by_hand(x, H, first, base);
    for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == Approx(expected[i]).margin(1e-12));
    // float32 computes the same rotation to float32's precision.
    const std::vector<double> y32 = rope(to_dtype(x, DType::f32), H, first, base).to_vector();
    for (std::size_t i = 0; i < y.size(); ++i) CHECK(y32[i] == Approx(expected[i]).margin(2e-6));
  }
  // Position 0 turns nothing; a pair [1, 0] at position 1 with θ₀ = 1 becomes [cos 1, sin 1].
  const Tensor x = Tensor::from_vector({1, 0, 1, 0}, {1, 2, 2}, DType::f64);  // [B 1, T 2, d 2]
  const std::vector<double> y = rope(x, 1).to_vector();
  CHECK(y[0] == 1);
  CHECK(y[1] == 0);
  CHECK(y[2] == Approx(std::cos(1.0)).margin(1e-15));
  CHECK(y[3] == Approx(std::sin(1.0)).margin(1e-15));
}

TEST_CASE("rope: norms are kept and q·k depends only on the distance of the positions", "[rope]") {
  Generator gen(11);
  const int64_t H = 2, d = 8, T = 5;
  const Tensor q = Tensor::randn({1, T, H * d}, gen, DType::f64), k = Tensor::randn({1, T, H * d}, gen, DType::f64);
  const std::vector<double> qv = q.to_vector(), kv = k.to_vector();
  const std::vector<double> q0 = rope(q, H, 0).to_vector(), k0 = rope(k, H, 0).to_vector();
  const std::vector<double> q7 = rope(q, H, 7).to_vector(), k7 = rope(k, H, 7).to_vector();  // every position + 7
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t row = t * H * d + h * d;
      CHECK(dot(q0, row, q0, row, d) == Approx(dot(qv, row, qv, row, d)).epsilon(1e-12));
      for (int64_t s = 0; s < T; ++s) {
        const int64_t other = s * H * d + h * d;
        CHECK(dot(q0, row, k0, other, d) == Approx(dot(q7, row, k7, other, d)).epsilon(1e-9).margin(1e-12));
      }
    }
  }
  // Without a turn, the same holds only by accident: the positions matter.
  CHECK(dot(q0, 0, k0, H * d, d) != Approx(dot(qv, 0, kv, H * d, d)).epsilon(1e-6));
}

TEST_CASE("rope: a decoding step's first position continues the sequence", "[rope]") {
  Generator gen(3);
  const Tensor x = Tensor::randn({2, 4, 12}, gen, DType::f64);  // [B, T, H·d], H 2, d 6
  const std::vector<double> whole = rope(x, 2).to_vector();
  const std::vector<double> step = rope(slice(x, 1, 3, 4), 2, 3).to_vector();  // token 3 alone
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t j = 0; j < 12; ++j) CHECK(step[b * 12 + j] == Approx(whole[(b * 4 + 3) * 12 + j]).margin(1e-14));
  }
}

TEST_CASE("rope: errors name the op and the shape", "[rope]") {
  CHECK_THROWS_WITH(rope(Tensor::zeros({2, 6}), 1), Contains("rope: x must be [B, T, H·d], got [2, 6]"));
  CHECK_THROWS_WITH(rope(Tensor::zeros({1, 2, 6}), 4), Contains("rope: 4 heads do not divide the width 6 of x [1, 2, 6]"));
  CHECK_THROWS_WITH(rope(Tensor::zeros({1, 2, 6}), 2), Contains("rope: the head size 3 must be even"));
  CHECK_THROWS_WITH(rope(Tensor::zeros({1, 2, 4}), 1, -1), Contains("first_position must be >= 0"));
  CHECK_THROWS_WITH(rope(Tensor::zeros({1, 2, 4}), 1, 0, 1.0), Contains("base must be > 1"));
  CHECK_THROWS_WITH(rope(Tensor::from_ids({1, 2}, {1, 1, 2}), 1), Contains("rope"));
}
