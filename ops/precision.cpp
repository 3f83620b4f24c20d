#include "ops/precision.h"

#include "core/autograd.h"
#include "core/error.h"

namespace qkgrad {

namespace {
thread_local Precision g_precision = Precision::f32;
}  // namespace

Precision linear_precision() { return g_precision; }

MixedPrecision::MixedPrecision(Precision precision) : saved_(g_precision) { g_precision = precision; }
MixedPrecision::~MixedPrecision() { g_precision = saved_; }

Tensor bf16_operand(const Tensor& t) {
  NoGradGuard no_grad;
  return t.to(DType::bf16);
}

Precision parse_precision(const std::string& name) {
  if (name == "f32") return Precision::f32;
  if (name == "bf16") return Precision::bf16;
  fail(cat("precision must be f32 or bf16, got '", name, "'"));
}

const char* precision_name(Precision precision) { return precision == Precision::bf16 ? "bf16" : "f32"; }

}  // namespace qkgrad
