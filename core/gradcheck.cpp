#include "core/gradcheck.h"

#include <cmath>

#include "core/autograd.h"
#include "core/error.h"

namespace qkgrad {

namespace {

std::vector<double> evaluate(const GradcheckFn& fn, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  return fn(inputs).to_vector();
}

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  std::vector<int> checked;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    QKGRAD_CHECK(x.defined(), "gradcheck: input ", i, " is undefined");
    if (!x.requires_grad()) continue;
    QKGRAD_CHECK(x.dtype() == DType::f64 && x.device() == Device::cpu, "gradcheck: input ", i,
                 " is ", describe(x), "; finite differences need float64 on the cpu (use "
                 ".to(DType::f64))");
    QKGRAD_CHECK(x.is_leaf(), "gradcheck: input ", i, " must be a leaf tensor");
    checked.push_back(static_cast<int>(i));
  }
  QKGRAD_CHECK(!checked.empty(), "gradcheck: no input requires grad, so there is nothing to check");

  const std::vector<double> reference = evaluate(fn, inputs);
  const std::size_t outputs = reference.size();

  // analytic[c][j * n + e]: d output j / d element e of checked input c.
  std::vector<std::vector<double>> analytic(checked.size());
  for (std::size_t c = 0; c < checked.size(); ++c) {
    analytic[c].assign(outputs * static_cast<std::size_t>(inputs[static_cast<std::size_t>(checked[c])].numel()), 0.0);
  }
  for (std::size_t j = 0; j < outputs; ++j) {
    for (int i : checked) inputs[i].impl()->grad.reset();
    const Tensor out = fn(inputs);
    QKGRAD_CHECK(out.dtype() == DType::f64, "gradcheck: the function returned ", describe(out),
                 "; it must compute in float64");
    QKGRAD_CHECK(static_cast<std::size_t>(out.numel()) == outputs, "gradcheck: the function returned ",
                 out.numel(), " elements, then ", outputs, "; it must be deterministic");
    if (!out.requires_grad()) break;  // the output does not depend on any checked input: J = 0
    Tensor seed = Tensor::zeros(out.shape(), DType::f64);
    seed.data<double>()[j] = 1.0;
    out.backward(seed);
    for (std::size_t c = 0; c < checked.size(); ++c) {
      const Tensor& x = inputs[checked[c]];
      if (!x.impl()->grad) continue;  // no path from this input to output j
      const double* g = Tensor(x.impl()->grad).data<double>();
      const std::size_t n = static_cast<std::size_t>(x.numel());
      for (std::size_t e = 0; e < n; ++e) analytic[c][j * n + e] = g[e];
    }
  }

  GradcheckResult result;
  for (std::size_t c = 0; c < checked.size(); ++c) {
    const Tensor& x = inputs[checked[c]];
    double* values = x.data<double>();
    const std::size_t n = static_cast<std::size_t>(x.numel());
    InputCheck check;
    check.input = checked[c];
    double worst_violation = 0;
    for (std::size_t e = 0; e < n; ++e) {
      const double original = values[e];
      std::vector<double> plus, minus;
      try {
        values[e] = original + options.eps;
        plus = evaluate(fn, inputs);
        values[e] = original - options.eps;
        minus = evaluate(fn, inputs);
      } catch (...) {
        values[e] = original;  // leave the caller's input as it was
        throw;
      }
      values[e] = original;
      QKGRAD_CHECK(plus.size() == outputs && minus.size() == outputs,
                   "gradcheck: the function's output size changed when its input was perturbed");
      for (std::size_t j = 0; j < outputs; ++j) {
        const double numeric = (plus[j] - minus[j]) / (2 * options.eps);
        const double a = analytic[c][j * n + e];
        const double abs_err = std::fabs(a - numeric);
        check.max_abs_err = std::max(check.max_abs_err, abs_err);
        if (std::fabs(numeric) >= 1e-6) check.max_rel_err = std::max(check.max_rel_err, abs_err / std::fabs(numeric));
        const double allowed = options.atol + options.rtol * std::fabs(numeric);
        if (!(abs_err <= allowed)) {  // also catches NaN
          check.passed = false;
          const double violation = std::isnan(abs_err) ? INFINITY : abs_err / allowed;
          if (violation >= worst_violation) {
            worst_violation = violation;
            check.worst = cat("d out[", j, "] / d input", check.input, "[", e, "]: analytic ", a,
                              " vs numeric ", numeric);
          }
        }
      }
    }
    x.impl()->grad.reset();
    x.mark_written();
    result.passed = result.passed && check.passed;
    result.max_abs_err = std::max(result.max_abs_err, check.max_abs_err);
    result.max_rel_err = std::max(result.max_rel_err, check.max_rel_err);
    result.inputs.push_back(check);
  }
  return result;
}

}  // namespace qkgrad
