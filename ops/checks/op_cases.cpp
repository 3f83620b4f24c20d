#include "ops/checks/op_cases.h"

#include <algorithm>

#include "core/unary_functions.h"
#include "ops/op_table.h"

namespace qkgrad {

const std::vector<OpInfo>& op_table() {
  static const std::vector<OpInfo> table = [] {
    std::vector<OpInfo> all = {
#define QKGRAD_OP_INFO(name, forward, backward) {#name, forward, backward},
        QKGRAD_DIFFERENTIABLE_OPS(QKGRAD_OP_INFO)
#undef QKGRAD_OP_INFO
    };
    // The unary maps (core/unary_functions.h) after the binary arithmetic (add, sub, mul, div).
    const std::vector<OpInfo> unary = {
#define QKGRAD_UNARY_INFO(name, functor, parameters, forward, backward) {#name, forward, backward},
        QKGRAD_UNARY_OPS(QKGRAD_UNARY_INFO)
#undef QKGRAD_UNARY_INFO
    };
    const auto after_div = std::find_if(all.begin(), all.end(), [](const OpInfo& op) { return op.name == "div"; }) + 1;
    all.insert(after_div, unary.begin(), unary.end());
    return all;
  }();
  return table;
}

std::string op_table_markdown() {
  std::string md =
      "# The ops\n\n"
      "Generated from `ops/op_table.h` by `qkgrad-gradcheck --markdown`; a test fails when this\n"
      "file and the table differ. x̄ is d(loss)/dx; `sum_to(t, x)` sums `t` over the axes along\n"
      "which `x` was broadcast. Derivations: `docs/autodiff.md`. Every op below has float64\n"
      "finite-difference checks in `ops/checks/` (`qkgrad-gradcheck --op NAME --verbose`).\n\n"
      "| op | forward | backward |\n|----|---------|----------|\n";
  for (const OpInfo& op : op_table()) {
    md += "| `" + op.name + "` | " + op.forward + " | " + op.backward + " |\n";
  }
  return md;
}

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> all;
    add_elementwise_cases(all);
    add_reduce_cases(all);
    add_matmul_cases(all);
    add_convert_cases(all);
    add_shape_cases(all);
    add_normalization_cases(all);
    add_loss_cases(all);
    add_attention_cases(all);
    return all;
  }();
  return cases;
}

std::vector<Tensor> make_case_inputs(const OpCase& c, uint64_t seed) {
  Generator gen(seed, /*stream=*/0x6772616463686b);  // "gradchk"
  std::vector<Tensor> inputs;
  for (const InputSpec& spec : c.inputs) {
    Tensor x;
    switch (spec.domain) {
      case InputDomain::normal:
        x = Tensor::randn(spec.shape, gen, DType::f64);
        break;
      case InputDomain::positive:
        x = Tensor::uniform(spec.shape, 0.5, 2.0, gen, DType::f64);
        break;
      case InputDomain::away_from_zero: {
        x = Tensor::uniform(spec.shape, 0.2, 1.5, gen, DType::f64);
        const Tensor sign = Tensor::uniform(spec.shape, -1.0, 1.0, gen, DType::f64);
        double* v = x.data<double>();
        const double* s = sign.data<double>();
        for (int64_t i = 0; i < x.numel(); ++i) v[i] = s[i] < 0 ? -v[i] : v[i];
        break;
      }
    }
    x.requires_grad_();
    inputs.push_back(x);
  }
  return inputs;
}

GradcheckResult run_op_case(const OpCase& c, uint64_t seed) {
  return gradcheck(c.fn, make_case_inputs(c, seed), c.options);
}

}  // namespace qkgrad
