// Forward values of every op against hand-computed answers, and the errors for bad shapes.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/ops.h"

using namespace qkgrad;
using Catch::Matchers::Contains;

namespace {
std::vector<double> values(const Tensor& t) { return t.to_vector(); }
Tensor vec(std::vector<double> v, Shape s, DType d = DType::f32) { return Tensor::from_vector(v, s, d); }
}  // namespace

TEST_CASE("add, sub, mul, div with equal shapes", "[ops]") {
  const Tensor a = vec({1, 2, 3, 4}, {2, 2});
  const Tensor b = vec({10, 20, 30, 40}, {2, 2});
  CHECK(values(a + b) == std::vector<double>{11, 22, 33, 44});
  CHECK(values(b - a) == std::vector<double>{9, 18, 27, 36});
  CHECK(values(a * b) == std::vector<double>{10, 40, 90, 160});
  CHECK(values(b / a) == std::vector<double>{10, 10, 10, 10});
  CHECK(values(-a) == std::vector<double>{-1, -2, -3, -4});
}

TEST_CASE("binary ops broadcast like NumPy", "[ops]") {
  const Tensor m = vec({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor row = vec({10, 20, 30}, {3});
  const Tensor col = vec({100, 200}, {2, 1});
  CHECK(values(m + row) == std::vector<double>{11, 22, 33, 14, 25, 36});
  CHECK(values(m * col) == std::vector<double>{100, 200, 300, 800, 1000, 1200});
  CHECK(values(row - m) == std::vector<double>{9, 18, 27, 6, 15, 24});
  const Tensor outer = vec({1, 2}, {2, 1}) * vec({1, 10, 100}, {1, 3});
  CHECK(outer.shape() == Shape{2, 3});
  CHECK(values(outer) == std::vector<double>{1, 10, 100, 2, 20, 200});
  const Tensor three = vec({1, 2}, {2, 1, 1}) + vec({0, 10, 20}, {3, 1});  // [2, 3, 1]
  CHECK(three.shape() == Shape{2, 3, 1});
  CHECK(values(three) == std::vector<double>{1, 11, 21, 2, 12, 22});
  CHECK(values(m / 2.0) == std::vector<double>{0.5, 1, 1.5, 2, 2.5, 3});
  CHECK(values(1.0 - row) == std::vector<double>{-9, -19, -29});
  CHECK(values(Tensor::scalar(2) * Tensor::scalar(4)) == std::vector<double>{8});
}

TEST_CASE("broadcast ops on large tensors take the parallel path and agree", "[ops]") {
  Generator gen(1);
  const Tensor a = Tensor::randn({300, 257}, gen, DType::f64);
  const Tensor b = Tensor::randn({257}, gen, DType::f64);
  const Tensor c = a * b;
  for (int64_t i : {0, 123, 299}) {
    for (int64_t j : {0, 100, 256}) CHECK(c.at({i, j}) == a.at({i, j}) * b.at({j}));
  }
}

TEST_CASE("shape and dtype mismatches name the op and the shapes", "[ops][errors]") {
  const Tensor a = Tensor::zeros({2, 3});
  CHECK_THROWS_WITH(a + Tensor::zeros({4}),
                    Contains("add: shapes [2, 3] and [4] cannot be broadcast together: dimension -1 is 3 vs 4"));
  CHECK_THROWS_WITH(a * Tensor::zeros({3, 3}), Contains("mul: shapes [2, 3] and [3, 3]"));
  CHECK_THROWS_WITH(a - Tensor::zeros({2, 3}, DType::f64), Contains("sub: dtypes differ: [2, 3] f32 cpu and [2, 3] f64 cpu"));
  CHECK_THROWS_WITH(div(a, Tensor()), Contains("div: an input tensor is undefined"));
}

TEST_CASE("unary ops: exp, log, tanh, relu", "[ops]") {
  const Tensor x = vec({-1, 0, 0.5, 2}, {4}, DType::f64);
  const auto e = values(exp(x)), t = values(tanh(x)), r = values(relu(x));
  for (std::size_t i = 0; i < 4; ++i) {
    const double v = values(x)[i];
    CHECK(e[i] == Approx(std::exp(v)).epsilon(1e-15));
    CHECK(t[i] == Approx(std::tanh(v)).epsilon(1e-15));
    CHECK(r[i] == std::max(v, 0.0));
  }
  CHECK(values(log(vec({1, std::exp(2.0)}, {2}, DType::f64)))[1] == Approx(2.0));
  CHECK(std::isnan(relu(vec({NAN}, {1})).item()));  // NaN is never hidden
}

TEST_CASE("sum and mean over everything and along axes", "[ops]") {
  const Tensor x = vec({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(sum(x).shape() == Shape{});
  CHECK(sum(x).item() == 21);
  CHECK(mean(x).item() == 3.5);
  CHECK(values(sum(x, 0)) == std::vector<double>{5, 7, 9});
  CHECK(values(sum(x, 1)) == std::vector<double>{6, 15});
  CHECK(sum(x, -1, true).shape() == Shape{2, 1});
  CHECK(values(mean(x, 0, true)) == std::vector<double>{2.5, 3.5, 4.5});
  CHECK(mean(x, 0, true).shape() == Shape{1, 3});
  const Tensor cube = Tensor::arange(24).reshape({2, 3, 4});
  CHECK(values(sum(cube, 1)) == std::vector<double>{12, 15, 18, 21, 48, 51, 54, 57});
  CHECK_THROWS_WITH(sum(x, 2), Contains("sum: axis 2 is out of range for a tensor of rank 2"));
  CHECK_THROWS_WITH(mean(Tensor::zeros({0, 3}), 0), Contains("mean: cannot average over axis 0 of size 0"));
}

TEST_CASE("large sums are deterministic and accurate", "[ops]") {
  const Tensor ones = Tensor::ones({1000, 1000});
  CHECK(sum(ones).item() == 1e6);
  CHECK(values(sum(ones, 0))[999] == 1000);
  CHECK(values(sum(ones, 1))[999] == 1000);
}

TEST_CASE("matmul: 2-D, batched, shared operands", "[ops]") {
  const Tensor a = vec({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = vec({7, 8, 9, 10, 11, 12}, {3, 2});
  CHECK(values(matmul(a, b)) == std::vector<double>{58, 64, 139, 154});
  const Tensor batch_a = vec({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  const Tensor batch_b = vec({1, 0, 0, 1, 0, 1, 1, 0}, {2, 2, 2});
  CHECK(values(matmul(batch_a, batch_b)) == std::vector<double>{1, 2, 3, 4, 6, 5, 8, 7});
  const Tensor shared = vec({1, 1, 1, 1}, {2, 2});
  CHECK(values(matmul(batch_a, shared)) == std::vector<double>{3, 3, 7, 7, 11, 11, 15, 15});
  CHECK(values(matmul(shared, batch_a)) == std::vector<double>{4, 6, 4, 6, 12, 14, 12, 14});
  CHECK(matmul(Tensor::ones({4, 2, 3, 5}), Tensor::ones({4, 2, 5, 6})).shape() == Shape{4, 2, 3, 6});
}

TEST_CASE("matmul agrees with a naive loop on a large batched product", "[ops]") {
  Generator gen(2);
  const Tensor a = Tensor::randn({3, 70, 90}, gen, DType::f64);
  const Tensor b = Tensor::randn({3, 90, 50}, gen, DType::f64);
  const Tensor c = matmul(a, b);
  for (int64_t n : {0, 2}) {
    for (int64_t i : {0, 69}) {
      for (int64_t j : {0, 49}) {
        double want = 0;
        for (int64_t k = 0; k < 90; ++k) want += a.at({n, i, k}) * b.at({n, k, j});
        CHECK(c.at({n, i, j}) == Approx(want).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("matmul shape errors name the shapes", "[ops][errors]") {
  CHECK_THROWS_WITH(matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})),
                    Contains("matmul: inner dimensions differ: a is [2, 3] and b is [4, 5] (a contributes k = 3, b contributes k = 4)"));
  CHECK_THROWS_WITH(matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({5, 3, 4})),
                    Contains("matmul: batch dimensions differ: a is [2, 2, 3] and b is [5, 3, 4]"));
  CHECK_THROWS_WITH(matmul(Tensor::zeros({3}), Tensor::zeros({3, 4})), Contains("matmul: both inputs need at least 2 dims, got a [3]"));
}
