// Gradient-check cases for the elementwise ops: same shapes, broadcasting both ways, scalars,
// size-1 dims, and an input used twice (gradients must add up).
#include "core/error.h"
#include "ops/op_cases.h"
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
}

}  // namespace qkgrad
