// Gradient-check cases for matmul: 2-D, batched, a shared 2-D operand on either side (its
// gradient sums over the batch), non-square and size-1 dims.
#include "core/error.h"
#include "ops/op_cases.h"
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
}

}  // namespace qkgrad
