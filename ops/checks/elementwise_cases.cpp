// Gradient-check cases for the elementwise ops: same shapes, broadcasting both ways, scalars,
// size-1 dims, and an input used twice (gradients must add up).
#include "core/error.h"
#include "ops/checks/op_cases.h"
#include "ops/ops.h"

namespace qkgrad {

namespace {

using In = std::vector<Tensor>;
constexpr auto kAny = InputDomain::normal;

// The broadcasting cases every binary op runs, with b drawn from `b_domain`.
void add_binary_cases(std::vector<OpCase>& cases, const std::string& op,
                      Tensor (*fn)(const Tensor&, const Tensor&), InputDomain b_domain) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}},        // same shape
      {{2, 3}, {3}},           // b broadcast along rows
      {{3}, {2, 3}},           // a broadcast along rows
      {{2, 1, 3}, {4, 1}},     // both broadcast: result [2, 4, 3]
      {{}, {2, 3}},            // a scalar
      {{2, 3}, {1}},           // size-1 b
      {{1, 4}, {3, 1}},        // outer-product broadcast, non-square
  };
  for (const auto& [sa, sb] : shapes) {
    cases.push_back({op, cat("broadcast ", sa, " ", op, " ", sb), {{sa, kAny}, {sb, b_domain}},
                     [fn](const In& x) { return fn(x[0], x[1]); }});
  }
}

}  // namespace

void add_elementwise_cases(std::vector<OpCase>& cases) {
  add_binary_cases(cases, "add", add, kAny);
  add_binary_cases(cases, "sub", sub, kAny);
  add_binary_cases(cases, "mul", mul, kAny);
  add_binary_cases(cases, "div", div, InputDomain::away_from_zero);
  cases.push_back({"mul", "x * x (one input used twice: its gradients add)", {{{2, 3}, kAny}},
                   [](const In& x) { return mul(x[0], x[0]); }});
  cases.push_back({"div", "x / x^2 with scalars", {{{3, 2}, InputDomain::away_from_zero}},
                   [](const In& x) { return div(x[0] * 2.0, x[0] * x[0]) + 1.0; }});

  cases.push_back({"neg", "[2, 3]", {{{2, 3}, kAny}}, [](const In& x) { return neg(x[0]); }});
  cases.push_back({"exp", "[2, 3]", {{{2, 3}, kAny}}, [](const In& x) { return exp(x[0]); }});
  cases.push_back({"log", "[2, 3], x > 0", {{{2, 3}, InputDomain::positive}},
                   [](const In& x) { return log(x[0]); }});
  cases.push_back({"tanh", "[2, 3]", {{{2, 3}, kAny}}, [](const In& x) { return tanh(x[0]); }});
  cases.push_back({"tanh", "[1, 5] of 3x (the saturated tails)", {{{1, 5}, kAny}},
                   [](const In& x) { return tanh(x[0] * 3.0); }});
  // relu is not differentiable at 0; the inputs stay at least 0.2 away from it.
  cases.push_back({"relu", "[3, 4], |x| >= 0.2", {{{3, 4}, InputDomain::away_from_zero}},
                   [](const In& x) { return relu(x[0]); }});

  const InputDomain pos = InputDomain::positive;
  cases.push_back({"add_scalar", "[2, 3] + 1.5", {{{2, 3}, kAny}}, [](const In& x) { return add_scalar(x[0], 1.5) * x[0]; }});
  cases.push_back({"add_scalar", "2 - x (through neg)", {{{4}, kAny}}, [](const In& x) { return 2.0 - x[0]; }});
  cases.push_back({"mul_scalar", "[2, 3] * -0.7", {{{2, 3}, kAny}}, [](const In& x) { return mul_scalar(x[0], -0.7); }});
  cases.push_back({"mul_scalar", "x / 4 and 3 / x", {{{2, 2}, InputDomain::away_from_zero}},
                   [](const In& x) { return x[0] / 4.0 + 3.0 / x[0]; }});
  cases.push_back({"sqrt", "[2, 3], x > 0", {{{2, 3}, pos}}, [](const In& x) { return sqrt(x[0]); }});
  cases.push_back({"rsqrt", "[2, 3], x > 0", {{{2, 3}, pos}}, [](const In& x) { return rsqrt(x[0]); }});
  cases.push_back({"square", "[3, 2]", {{{3, 2}, kAny}}, [](const In& x) { return square(x[0]); }});
  cases.push_back({"pow", "x^3 and x^-1.5 (x > 0)", {{{2, 3}, pos}},
                   [](const In& x) { return pow(x[0], 3.0) + pow(x[0], -1.5); }});
  cases.push_back({"pow", "x^0 has zero gradient", {{{3}, kAny}}, [](const In& x) { return pow(x[0], 0.0) + x[0]; }});
  cases.push_back({"sigmoid", "[2, 3] of 3x (both tails)", {{{2, 3}, kAny}}, [](const In& x) { return sigmoid(x[0] * 3.0); }});
  cases.push_back({"gelu", "[2, 4] of 2x", {{{2, 4}, kAny}}, [](const In& x) { return gelu(x[0] * 2.0); }});
  cases.push_back({"silu", "[2, 4] of 3x (both tails)", {{{2, 4}, kAny}}, [](const In& x) { return silu(x[0] * 3.0); }});
  // clamp has kinks at its bounds; the inputs (|x| in [0.2, 1.5]) stay away from ±0.1 and ±2.
  cases.push_back({"clamp", "[-0.1, 0.1]: inside and outside", {{{3, 4}, InputDomain::away_from_zero}},
                   [](const In& x) { return clamp(x[0] * 0.1, -0.1, 0.1) + clamp(x[0], -0.1, 2.0); }});

  // A fixed 0/1 mask (from the case's shape, not random: it has no gradient), on the device of
  // the inputs (the GPU tests run every case there too).
  auto mask = [](const Shape& s, const Tensor& like) {
    std::vector<double> m(static_cast<std::size_t>(s.numel()));
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = (i * 7 + 3) % 3 == 0 ? 1.0 : 0.0;
    return Tensor::from_vector(m, s, DType::f64, like.device());
  };
  cases.push_back({"where", "mask [2, 3], a [2, 3], b [3] (broadcast)", {{{2, 3}, kAny}, {{3}, kAny}},
                   [mask](const In& x) { return where(mask({2, 3}, x[0]), x[0], x[1]); }});
  cases.push_back({"where", "mask [2, 1] broadcast over a and b [2, 4]", {{{2, 4}, kAny}, {{2, 4}, kAny}},
                   [](const In& x) { return where(Tensor::from_vector({1, 0}, {2, 1}, DType::f64, x[0].device()), x[0], x[1]); }});
  cases.push_back({"masked_fill", "mask [1, 3] over x [2, 3], fill -1e9", {{{2, 3}, kAny}},
                   [](const In& x) { return masked_fill(x[0], Tensor::from_vector({0, 1, 0}, {1, 3}, DType::f64, x[0].device()), -1e9); }});
}

}  // namespace qkgrad
