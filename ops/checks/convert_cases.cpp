// Gradient-check cases for reshape and dtype conversion.
#include "ops/checks/op_cases.h"
#include "ops/ops.h"

namespace qkgrad {

void add_convert_cases(std::vector<OpCase>& cases) {
  using In = std::vector<Tensor>;
  const InputDomain any = InputDomain::normal;
  cases.push_back({"reshape", "[2, 3] -> [3, 2], then scaled", {{{2, 3}, any}},
                   [](const In& x) { return reshape(x[0], {3, 2}) * x[0].reshape({3, 2}); }});
  cases.push_back({"reshape", "[2, 3, 2] -> [12]", {{{2, 3, 2}, any}},
                   [](const In& x) { return exp(reshape(x[0], {12})); }});
  // A round trip through float32 rounds x to 24 bits, so the difference quotient needs a large
  // step (1e-2) to see the slope of 1 through that rounding; tolerances scale accordingly.
  GradcheckOptions coarse;
  coarse.eps = 1e-2;
  coarse.atol = 1e-5;
  coarse.rtol = 1e-4;
  cases.push_back({"to_dtype", "f64 -> f32 -> f64 of [2, 3]", {{{2, 3}, any}},
                   [](const In& x) { return to_dtype(to_dtype(x[0], DType::f32), DType::f64) * 3.0; },
                   coarse});
  // Through bfloat16 the rounding is 2^-8 relative (up to 0.03 for |x| < 8): a step of 1 sees
  // the slope of 1 to within spacing / (2 step). The case has no other factor, so that the
  // check measures the cast's identity Jacobian alone.
  GradcheckOptions coarser;
  coarser.eps = 1.0;
  coarser.atol = 2e-2;
  coarser.rtol = 2e-2;
  cases.push_back({"to_dtype", "f64 -> bf16 -> f64 of [2, 3]", {{{2, 3}, any}},
                   [](const In& x) { return to_dtype(to_dtype(x[0], DType::bf16), DType::f64); }, coarser});
}

}  // namespace qkgrad
