// Every op in ops/op_table.h has a gradient-check case and passes it; gradcheck itself can fail.
#include <catch2/catch.hpp>

#include <set>

#include "core/autograd.h"
#include "core/error.h"
#include "core/gradcheck.h"
#include "ops/checks/op_cases.h"
#include "ops/op_table.h"
#include "ops/ops.h"

using namespace qkgrad;
using Catch::Matchers::Contains;

TEST_CASE("every op in the op table has at least one gradcheck case, and no case is orphaned", "[gradcheck]") {
  std::set<std::string> with_cases, names;
  for (const OpCase& c : op_cases()) with_cases.insert(c.op);
  for (const OpInfo& op : op_table()) {
    names.insert(op.name);
    INFO("op " << op.name);
    CHECK(with_cases.count(op.name) == 1);
  }
  for (const std::string& op : with_cases) {
    INFO("case for unknown op " << op);
    CHECK(names.count(op) == 1);
  }
}

TEST_CASE("every registered op passes its float64 finite-difference check", "[gradcheck]") {
  for (const OpCase& c : op_cases()) {
    DYNAMIC_SECTION(c.op << ": " << c.name) {
      for (uint64_t seed : {0u, 1u}) {
        const GradcheckResult r = run_op_case(c, seed);
        INFO("seed " << seed << " max_abs_err " << r.max_abs_err);
        for (const InputCheck& in : r.inputs) INFO(in.worst);
        CHECK(r.passed);
        CHECK(r.inputs.size() == c.inputs.size());
      }
    }
  }
}

namespace {
// x³ with a deliberately wrong backward (2x² instead of 3x²): gradcheck must catch it.
Tensor wrong_cube(const Tensor& x) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = x * x * x;
  }
  if (should_record(x)) {
    record("wrong_cube", {x}, {y}, {x}, [](BackwardContext& ctx) {
      const Tensor& xs = ctx.saved(0);
      ctx.accumulate(0, ctx.grad_output() * xs * xs * 2.0);
    });
  }
  return y;
}
}  // namespace

TEST_CASE("gradcheck fails a wrong backward and says where", "[gradcheck]") {
  Generator gen(1);
  Tensor x = Tensor::uniform({3}, 0.5, 1.5, gen, DType::f64);
  x.requires_grad_();
  const GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return wrong_cube(in[0]); }, {x});
  CHECK_FALSE(r.passed);
  REQUIRE(r.inputs.size() == 1);
  CHECK(r.inputs[0].max_abs_err > 0.1);
  CHECK_THAT(r.inputs[0].worst, Contains("analytic") && Contains("numeric"));
  CHECK_FALSE(x.grad().defined());  // inputs are restored
}

TEST_CASE("gradcheck refuses float32 inputs and inputs without grad", "[gradcheck][errors]") {
  Tensor f = Tensor::ones({2});
  f.requires_grad_();
  CHECK_THROWS_WITH(gradcheck([](const std::vector<Tensor>& in) { return in[0] * 2.0; }, {f}),
                    Contains("finite differences need float64"));
  const Tensor plain = Tensor::ones({2}, DType::f64);
  CHECK_THROWS_WITH(gradcheck([](const std::vector<Tensor>& in) { return in[0] * 2.0; }, {plain}),
                    Contains("no input requires grad"));
}
