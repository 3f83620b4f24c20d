// Gradient-check cases: tiny float64 problems, one or more per op in ops/op_table.h, shared by
// qkgrad-gradcheck and the Catch2 suite. The cases of each op family live in ops/checks/.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/gradcheck.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace qkgrad {

// Where a case draws an input from (e.g. log needs x > 0, relu avoids its kink at 0).
enum class InputDomain {
  normal,          // standard normal
  positive,        // uniform in [0.5, 2]
  away_from_zero,  // uniform magnitude in [0.2, 1.5] with a random sign
};

struct InputSpec {
  Shape shape;
  InputDomain domain = InputDomain::normal;
};

// A case's function must compute in the dtype of its inputs: the suite also runs every case in
// float32 and compares it with float64 (tests/test_float32.cpp).
struct OpCase {
  std::string op;    // a name from op_table.h
  std::string name;  // what the case covers, e.g. "broadcast [2, 3] + [3]"
  std::vector<InputSpec> inputs;
  GradcheckFn fn;
  GradcheckOptions options{};
};

// Every case of every op, in op_table order.
const std::vector<OpCase>& op_cases();

// The case's inputs: float64, requiring grad, drawn from Philox with the given seed.
std::vector<Tensor> make_case_inputs(const OpCase& c, uint64_t seed);

GradcheckResult run_op_case(const OpCase& c, uint64_t seed = 0);

// Registration functions, one per file in ops/checks/.
void add_elementwise_cases(std::vector<OpCase>& cases);
void add_reduce_cases(std::vector<OpCase>& cases);
void add_matmul_cases(std::vector<OpCase>& cases);
void add_convert_cases(std::vector<OpCase>& cases);
void add_shape_cases(std::vector<OpCase>& cases);
void add_normalization_cases(std::vector<OpCase>& cases);
void add_loss_cases(std::vector<OpCase>& cases);
void add_attention_cases(std::vector<OpCase>& cases);

}  // namespace qkgrad
