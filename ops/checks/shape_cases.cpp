// Gradient-check cases for data movement: permute/transpose, concat, slice/split, pad, and the
// indexed reads (with repeated indices, whose gradients must add up).
#include "core/error.h"
#include "ops/checks/op_cases.h"
#include "ops/ops.h"

namespace qkgrad {

void add_shape_cases(std::vector<OpCase>& cases) {
  using In = std::vector<Tensor>;
  const InputDomain any = InputDomain::normal;
  // Each function multiplies by a fixed ramp so that every output position has its own weight.
  auto ramp = [](const Tensor& y) {
    return y * (Tensor::arange(y.numel(), y.dtype(), y.device()) * 0.25 + 0.5).reshape(y.shape());
  };
  cases.push_back({"permute", "[2, 3, 4] -> (2, 0, 1)", {{{2, 3, 4}, any}},
                   [ramp](const In& x) { return ramp(permute(x[0], {2, 0, 1})); }});
  cases.push_back({"permute", "[3, 1, 2] -> (1, 2, 0) (a size-1 dim)", {{{3, 1, 2}, any}},
                   [ramp](const In& x) { return ramp(permute(x[0], {1, 2, 0})); }});
  cases.push_back({"transpose", "(1, 2) of [2, 3, 2]", {{{2, 3, 2}, any}},
                   [ramp](const In& x) { return ramp(transpose(x[0], 1, 2)); }});
  cases.push_back({"transpose", "a row [1, 4]", {{{1, 4}, any}},
                   [ramp](const In& x) { return ramp(transpose(x[0], 0, -1)); }});
  cases.push_back({"concat", "[2, 1, 3] and [2, 2, 3] along 1", {{{2, 1, 3}, any}, {{2, 2, 3}, any}},
                   [ramp](const In& x) { return ramp(concat({x[0], x[1]}, 1)); }});
  cases.push_back({"concat", "x with itself along 0", {{{2, 3}, any}},
                   [ramp](const In& x) { return ramp(concat({x[0], x[0]}, 0)); }});
  cases.push_back({"slice", "[1:3) of axis 1 of [2, 4, 2]", {{{2, 4, 2}, any}},
                   [ramp](const In& x) { return ramp(slice(x[0], 1, 1, 3)); }});
  cases.push_back({"split", "[5, 2] into 2 + 3 rows, recombined", {{{5, 2}, any}}, [ramp](const In& x) {
                     const auto parts = split(x[0], {2, 3}, 0);
                     return ramp(concat({parts[1], parts[0] * 2.0}, 0));
                   }});
  cases.push_back({"split", "[2, 6] into 1 + 0 + 5 columns", {{{2, 6}, any}}, [ramp](const In& x) {
                     const auto parts = split(x[0], {1, 0, 5}, 1);
                     return ramp(concat({parts[2], parts[0]}, 1));
                   }});
  cases.push_back({"pad", "2 before, 1 after on axis -1 of [2, 3]", {{{2, 3}, any}},
                   [ramp](const In& x) { return ramp(pad(x[0], -1, 2, 1, 0.5)); }});
  cases.push_back({"index_select", "rows (2, 0, 2) of [3, 4] (a repeat)", {{{3, 4}, any}},
                   [ramp](const In& x) { return ramp(index_select(x[0], 0, Tensor::from_ids({2, 0, 2}, {3}, x[0].device()))); }});
  cases.push_back({"index_select", "axis 1 of [2, 3, 2]", {{{2, 3, 2}, any}},
                   [ramp](const In& x) { return ramp(index_select(x[0], 1, Tensor::from_ids({1, 1, 0, 2}, {4}, x[0].device()))); }});
  cases.push_back({"gather", "axis 1 of [2, 3] with repeats", {{{2, 3}, any}}, [ramp](const In& x) {
                     return ramp(gather(x[0], 1, Tensor::from_ids({0, 2, 2, 1, 1, 0, 1, 1}, {2, 4}, x[0].device())));
                   }});
  cases.push_back({"gather", "axis 0 of [3, 2]", {{{3, 2}, any}}, [ramp](const In& x) {
                     return ramp(gather(x[0], 0, Tensor::from_ids({2, 0}, {1, 2}, x[0].device())));
                   }});
  cases.push_back({"embedding", "V = 5, D = 3, ids [2, 3] with repeats", {{{5, 3}, any}}, [ramp](const In& x) {
                     return ramp(embedding(x[0], Tensor::from_ids({4, 0, 4, 1, 4, 0}, {2, 3}, x[0].device())));
                   }});
}

}  // namespace qkgrad
