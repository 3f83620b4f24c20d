// The one list of every differentiable op. The gradient-check program, the test suite and the
// docs loop over it; tests/test_gradcheck.cpp fails if an op here has no check case.
//
// To add an op: write it in ops/ (forward, backward, math comment), add a line here, and add
// at least one case in ops/checks/. See README.md, "Adding an op".
#pragma once

#include <string>
#include <vector>

// X(name, summary)
#define QKGRAD_DIFFERENTIABLE_OPS(X)                                   \
  X(add, "a + b with broadcasting")                                    \
  X(sub, "a - b with broadcasting")                                    \
  X(mul, "a * b with broadcasting")                                    \
  X(div, "a / b with broadcasting")                                    \
  X(neg, "-x")                                                         \
  X(exp, "e^x")                                                        \
  X(log, "natural log")                                                \
  X(tanh, "hyperbolic tangent")                                        \
  X(relu, "max(x, 0)")                                                 \
  X(sum, "sum of all elements, or along an axis (keepdim optional)")   \
  X(mean, "mean of all elements, or along an axis (keepdim optional)") \
  X(matmul, "matrix product, 2-D or batched (BLAS)")                   \
  X(reshape, "same data, another shape (shares storage)")              \
  X(to_dtype, "conversion between float32 and float64")

namespace qkgrad {

struct OpInfo {
  std::string name;
  std::string summary;
};

const std::vector<OpInfo>& op_table();

}  // namespace qkgrad
