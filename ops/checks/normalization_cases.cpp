// Gradient-check cases for softmax, log_softmax, layer_norm, rms_norm, l2_normalize and scale_norm.
#include "ops/checks/op_cases.h"
#include "ops/ops.h"

namespace qkgrad {

void add_normalization_cases(std::vector<OpCase>& cases) {
  using In = std::vector<Tensor>;
  const InputDomain any = InputDomain::normal;
  // Weighted outputs: a plain sum of a softmax row is constant (1), so its gradient is 0.
  auto weigh = [](const Tensor& y) {
    return y * (Tensor::arange(y.numel(), y.dtype(), y.device()) * 0.37 + 1.0).reshape(y.shape());
  };
  cases.push_back({"softmax", "[2, 5] of 3x", {{{2, 5}, any}}, [weigh](const In& x) { return weigh(softmax(x[0] * 3.0)); }});
  cases.push_back({"softmax", "[2, 1, 4], a size-1 dim", {{{2, 1, 4}, any}}, [weigh](const In& x) { return weigh(softmax(x[0])); }});
  cases.push_back({"log_softmax", "[3, 4]", {{{3, 4}, any}}, [weigh](const In& x) { return weigh(log_softmax(x[0])); }});
  cases.push_back({"log_softmax", "[1, 7] of 5x", {{{1, 7}, any}}, [weigh](const In& x) { return weigh(log_softmax(x[0] * 5.0)); }});
  cases.push_back({"layer_norm", "[2, 3, 5] with gamma and beta", {{{2, 3, 5}, any}, {{5}, any}, {{5}, any}},
                   [weigh](const In& x) { return weigh(layer_norm(x[0], x[1], x[2], 1e-5)); }});
  cases.push_back({"layer_norm", "[4, 2], large eps", {{{4, 2}, any}, {{2}, any}, {{2}, any}},
                   [weigh](const In& x) { return weigh(layer_norm(x[0], x[1], x[2], 0.5)); }});
  cases.push_back({"l2_normalize", "[3, 4]", {{{3, 4}, any}}, [weigh](const In& x) { return weigh(l2_normalize(x[0])); }});
  // A row whose norm is below eps takes the linear branch y = x / eps.
  cases.push_back({"l2_normalize", "[2, 3] of 0.01x, eps 0.5 (below eps)", {{{2, 3}, any}},
                   [weigh](const In& x) { return weigh(l2_normalize(x[0] * 0.01, 0.5)); }});
  cases.push_back({"rms_norm", "[2, 3, 5] with gamma", {{{2, 3, 5}, any}, {{5}, any}},
                   [weigh](const In& x) { return weigh(rms_norm(x[0], x[1], 1e-6)); }});
  cases.push_back({"rms_norm", "[4, 2], large eps", {{{4, 2}, any}, {{2}, any}},
                   [weigh](const In& x) { return weigh(rms_norm(x[0], x[1], 0.5)); }});
  cases.push_back({"scale_norm", "[2, 2, 4] with scalar g", {{{2, 2, 4}, any}, {{}, InputDomain::positive}},
                   [weigh](const In& x) { return weigh(scale_norm(x[0], x[1])); }});
  cases.push_back({"scale_norm", "[3, 3] with g [1]", {{{3, 3}, any}, {{1}, InputDomain::positive}},
                   [weigh](const In& x) { return weigh(scale_norm(x[0], x[1], 1e-5)); }});
}

}  // namespace qkgrad
