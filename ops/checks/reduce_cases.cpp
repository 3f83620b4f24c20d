// Gradient-check cases for sum and mean: everything, each axis, negative axes, keepdim, size-1.
#include "ops/checks/op_cases.h"
#include "ops/ops.h"

namespace qkgrad {

void add_reduce_cases(std::vector<OpCase>& cases) {
  using In = std::vector<Tensor>;
  const InputDomain any = InputDomain::normal;
  cases.push_back({"sum", "all of [2, 3]", {{{2, 3}, any}}, [](const In& x) { return sum(x[0]); }});
  cases.push_back({"sum", "axis 0 of [2, 3]", {{{2, 3}, any}}, [](const In& x) { return sum(x[0], 0); }});
  cases.push_back({"sum", "axis -1 of [2, 3, 4], keepdim", {{{2, 3, 4}, any}},
                   [](const In& x) { return sum(x[0], -1, true); }});
  cases.push_back({"sum", "axis 1 of [2, 3, 4]", {{{2, 3, 4}, any}}, [](const In& x) { return sum(x[0], 1); }});
  cases.push_back({"sum", "axis 1 of [2, 1, 3] (size-1 axis)", {{{2, 1, 3}, any}},
                   [](const In& x) { return sum(x[0], 1, true); }});
  cases.push_back({"mean", "all of [3, 2]", {{{3, 2}, any}}, [](const In& x) { return mean(x[0]); }});
  cases.push_back({"mean", "axis 0 of [3, 4], keepdim", {{{3, 4}, any}},
                   [](const In& x) { return mean(x[0], 0, true); }});
  cases.push_back({"mean", "axis -2 of [2, 3, 2]", {{{2, 3, 2}, any}}, [](const In& x) { return mean(x[0], -2); }});

  // Random normal inputs have no ties, so the argmax is unique and stable under ±eps.
  cases.push_back({"max", "all of [3, 4]", {{{3, 4}, any}}, [](const In& x) { return max(x[0]); }});
  cases.push_back({"max", "axis 1 of [2, 5, 3]", {{{2, 5, 3}, any}}, [](const In& x) { return max(x[0], 1); }});
  cases.push_back({"max", "axis -1 of [4, 3], keepdim", {{{4, 3}, any}}, [](const In& x) { return max(x[0], -1, true); }});
  cases.push_back({"logsumexp", "all of [2, 3]", {{{2, 3}, any}}, [](const In& x) { return logsumexp(x[0]); }});
  cases.push_back({"logsumexp", "axis -1 of [3, 5] of 4x", {{{3, 5}, any}},
                   [](const In& x) { return logsumexp(x[0] * 4.0, -1); }});
  cases.push_back({"logsumexp", "axis 0 of [4, 2], keepdim", {{{4, 2}, any}},
                   [](const In& x) { return logsumexp(x[0], 0, true); }});
  cases.push_back({"norm", "all of [2, 3]", {{{2, 3}, any}}, [](const In& x) { return norm(x[0]); }});
  cases.push_back({"norm", "axis -1 of [3, 4]", {{{3, 4}, any}}, [](const In& x) { return norm(x[0], -1); }});
  cases.push_back({"norm", "axis 1 of [2, 3, 2], keepdim", {{{2, 3, 2}, any}},
                   [](const In& x) { return norm(x[0], 1, true); }});
}

}  // namespace qkgrad
