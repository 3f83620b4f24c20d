// gradcheck: does an op's hand-derived backward match finite differences?
//
// For f: inputs -> output, it builds the full Jacobian twice, on tiny float64 inputs:
//   analytic  J[j, e] from backward() seeded with the one-hot vector of output element j
//   numeric   J[j, e] = (f(x + eps·e) - f(x - eps·e))[j] / (2 eps)     (central differences)
// and requires |analytic - numeric| <= atol + rtol·|numeric| for every entry. Central
// differences are accurate to O(eps²) from truncation plus O(1e-16·|f| / eps) from rounding,
// about 1e-10 for eps = 1e-6, far inside the default tolerances (docs/gradcheck.md).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace qkgrad {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-7;
  double rtol = 1e-5;
};

struct InputCheck {
  int input = 0;             // index into the inputs
  double max_abs_err = 0;    // max |analytic - numeric| over the Jacobian
  double max_rel_err = 0;    // max |analytic - numeric| / |numeric| over entries with |numeric| >= 1e-6
  bool passed = true;
  std::string worst;         // where the largest violation is, when it failed
};

struct GradcheckResult {
  bool passed = true;
  std::vector<InputCheck> inputs;  // one per input that requires grad
  double max_abs_err = 0;
  double max_rel_err = 0;
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Checks every input that requires grad. Inputs must be float64 on the cpu; they are perturbed
// in place during the check and restored afterwards (their .grad is cleared).
GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace qkgrad
