// Stochastic gradient descent with momentum and (coupled) weight decay:
//   g = grad + weight_decay · p
//   v = momentum · v + g          (v starts at 0; skipped when momentum == 0)
//   p = p - lr · v
// The update is one fused backend kernel per parameter, run under NoGradGuard.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace qkgrad {

class SGD {
 public:
  explicit SGD(std::vector<Tensor> params, double lr, double momentum = 0.0,
               double weight_decay = 0.0);

  // Updates every parameter that has a gradient; parameters without one are left alone.
  void step();
  // Sets every gradient to zero (keeping the buffers, so the next backward does not allocate).
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr);

 private:
  std::vector<Tensor> params_;
  std::vector<Tensor> velocity_;  // one per parameter, allocated on the first step
  double lr_;
  double momentum_;
  double weight_decay_;
};

}  // namespace qkgrad
