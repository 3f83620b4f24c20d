// Gradient-check cases for matmul: 2-D, batched, a shared 2-D operand on either side (its
// gradient sums over the batch), non-square and size-1 dims.
#include "core/error.h"
#include "ops/checks/op_cases.h"
#include "ops/ops.h"

namespace qkgrad {

void add_matmul_cases(std::vector<OpCase>& cases) {
  using In = std::vector<Tensor>;
  const InputDomain any = InputDomain::normal;
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4}, {4, 2}},           // 2-D, non-square
      {{1, 4}, {4, 1}},           // a row times a column
      {{2, 3, 4}, {2, 4, 5}},     // batched
      {{2, 2, 3, 2}, {2, 2, 2, 3}},  // two batch dims
      {{2, 3, 4}, {4, 2}},        // b shared by the batch
      {{3, 4}, {2, 4, 2}},        // a shared by the batch
  };
  for (const auto& [sa, sb] : shapes) {
    cases.push_back({"matmul", cat(sa, " x ", sb), {{sa, any}, {sb, any}},
                     [](const In& x) { return matmul(x[0], x[1]); }});
  }
  cases.push_back({"matmul", "[3, 3] times itself (both gradients land on one input)", {{{3, 3}, any}},
                   [](const In& x) { return matmul(x[0], x[0]); }});

  // Transpose flags: every combination, 2-D, batched and with a shared operand.
  struct Flagged { Shape a, b; bool ta, tb; };
  const std::vector<Flagged> flagged = {
      {{4, 3}, {4, 2}, true, false},         // Aᵀ B
      {{3, 4}, {2, 4}, false, true},         // A Bᵀ
      {{4, 3}, {2, 4}, true, true},          // Aᵀ Bᵀ
      {{2, 4, 3}, {2, 2, 4}, true, true},    // batched
      {{2, 3, 4}, {5, 4}, false, true},      // shared B, transposed (x Wᵀ)
      {{2, 4, 3}, {4, 2}, true, false},      // shared B, A transposed
      {{4, 3}, {2, 4, 2}, true, false},      // shared A, transposed
      {{3, 4}, {2, 2, 4}, false, true},      // shared A, B transposed
  };
  for (const Flagged& f : flagged) {
    cases.push_back({"matmul", cat(f.a, f.ta ? "ᵀ" : "", " x ", f.b, f.tb ? "ᵀ" : ""), {{f.a, any}, {f.b, any}},
                     [f](const In& x) { return matmul(x[0], x[1], f.ta, f.tb); }});
  }

  cases.push_back({"linear", "[2, 3, 4] x W[5, 4]ᵀ + b[5]", {{{2, 3, 4}, any}, {{5, 4}, any}, {{5}, any}},
                   [](const In& x) { return linear(x[0], x[1], x[2]); }});
  cases.push_back({"linear", "[3, 2] x W[1, 2]ᵀ, no bias", {{{3, 2}, any}, {{1, 2}, any}},
                   [](const In& x) { return linear(x[0], x[1]); }});
  cases.push_back({"linear", "one row [1, 3] x W[2, 3]ᵀ + b", {{{1, 3}, any}, {{2, 3}, any}, {{2}, any}},
                   [](const In& x) { return linear(x[0], x[1], x[2]); }});
}

}  // namespace qkgrad
