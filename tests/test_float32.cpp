// Every gradient-check case, run in float32, agrees with float64 in value and gradients:
// |f32 − f64| <= 2e-4 · (1 + |f64|) elementwise (float32 has 24 bits, about 6e-8 per rounding;
// the bound leaves room for the few hundred roundings of the largest case).
#include <catch2/catch.hpp>

#include <cmath>

#include "ops/checks/op_cases.h"
#include "ops/ops.h"

using namespace qkgrad;

TEST_CASE("float32 agrees with float64 on every op case, forward and backward", "[float32]") {
  for (const OpCase& c : op_cases()) {
    DYNAMIC_SECTION(c.op << ": " << c.name) {
      const std::vector<Tensor> in64 = make_case_inputs(c, 0);
      std::vector<Tensor> in32;
      for (const Tensor& x : in64) in32.push_back(x.detach().to(DType::f32).requires_grad_());
      const Tensor y64 = c.fn(in64);
      const Tensor upstream = Tensor::full(y64.shape(), 1.0, DType::f64) + Tensor::arange(y64.numel(), DType::f64).reshape(y64.shape()) * 0.1;
      y64.backward(upstream);
      const Tensor y32 = c.fn(in32);
      y32.backward(upstream.to(y32.dtype()));
      auto close = [](const Tensor& a32, const Tensor& a64, const char* what) {
        const auto u = a32.to_vector(), v = a64.to_vector();
        REQUIRE(u.size() == v.size());
        for (std::size_t i = 0; i < u.size(); ++i) {
          INFO(what << " element " << i << ": f32 " << u[i] << " vs f64 " << v[i]);
          CHECK(std::fabs(u[i] - v[i]) <= 2e-4 * (1 + std::fabs(v[i])));
        }
      };
      close(y32, y64, "value");
      for (std::size_t i = 0; i < in64.size(); ++i) close(in32[i].grad(), in64[i].grad(), "gradient");
      for (const Tensor& x : in64) x.impl()->grad.reset();
    }
  }
}
