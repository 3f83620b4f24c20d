// Gradient-check cases for the losses and dropout.
#include "ops/checks/op_cases.h"
#include "ops/ops.h"

namespace qkgrad {

void add_loss_cases(std::vector<OpCase>& cases) {
  using In = std::vector<Tensor>;
  const InputDomain any = InputDomain::normal;
  cases.push_back({"cross_entropy", "[4, 5], smoothing 0.1, one row ignored", {{{4, 5}, any}}, [](const In& x) {
                     return cross_entropy(x[0], Tensor::from_ids({2, -1, 0, 4}, {4}, x[0].device()), 0.1, -1).sum;
                   }});
  cases.push_back({"cross_entropy", "[2, 3, 4] of 3x, no smoothing, pad id 0", {{{2, 3, 4}, any}}, [](const In& x) {
                     return cross_entropy(x[0] * 3.0, Tensor::from_ids({1, 3, 0, 2, 2, 1}, {2, 3}, x[0].device()), 0.0, 0).sum;
                   }});
  cases.push_back({"cross_entropy", "[4, 5] of 2x, z-loss 0.3 and smoothing 0.1, one row ignored", {{{4, 5}, any}},
                   [](const In& x) {
                     return cross_entropy(x[0] * 2.0, Tensor::from_ids({2, -1, 0, 4}, {4}, x[0].device()), 0.1, -1, 0.3).sum;
                   }});
  cases.push_back({"cross_entropy", "[2, 2, 3] + 2 (lse far from 0), z-loss 1e-2", {{{2, 2, 3}, any}}, [](const In& x) {
                     return cross_entropy(x[0] + 2.0, Tensor::from_ids({1, 0, 2, 2}, {2, 2}, x[0].device()), 0.0, -1, 1e-2).sum;
                   }});
  cases.push_back({"cross_entropy", "full smoothing (ε = 1: uniform target)", {{{3, 4}, any}}, [](const In& x) {
                     return cross_entropy(x[0], Tensor::from_ids({0, 1, 2}, {3}, x[0].device()), 1.0).sum;
                   }});
  cases.push_back({"nll", "log_softmax then nll, [3, 4], one row ignored", {{{3, 4}, any}}, [](const In& x) {
                     return nll(log_softmax(x[0]), Tensor::from_ids({3, 7, 1}, {3}, x[0].device()), 7).sum;
                   }});
  // A fresh generator per call: the same mask in every forward of the check.
  cases.push_back({"dropout", "p = 0.4 on [3, 5]", {{{3, 5}, any}}, [](const In& x) {
                     Generator gen(17);
                     return dropout(x[0], 0.4, gen);
                   }});
  cases.push_back({"dropout", "p = 0.1 on [1, 9] (not a multiple of 4)", {{{1, 9}, any}}, [](const In& x) {
                     Generator gen(3, 5);
                     return dropout(x[0] * 2.0, 0.1, gen);
                   }});
}

}  // namespace qkgrad
