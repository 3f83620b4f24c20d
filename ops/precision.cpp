#include "ops/precision.h"

#include "core/autograd.h"
#include "core/error.h"

namespace qkgrad {

namespace {
thread_local Precision g_precision = Precision::f32;
thread_local MixedPrecision* g_guard = nullptr;  // the innermost guard on this thread
}  // namespace

Precision linear_precision() { return g_precision; }

MixedPrecision::MixedPrecision(Precision precision) : saved_(g_precision), outer_(g_guard) {
  g_precision = precision;
  g_guard = this;
}
MixedPrecision::~MixedPrecision() {
  g_precision = saved_;
  g_guard = outer_;
}

Tensor bf16_operand(const Tensor& t) {
  NoGradGuard no_grad;
  if (g_guard == nullptr || !t.is_leaf() || !t.requires_grad()) return t.to(DType::bf16);
  auto [entry, made] = g_guard->weights_.try_emplace(t.impl());
  MixedPrecision::Rounded& r = entry->second;
  if (made || r.version != t.version()) r = {t, t.version(), t.to(DType::bf16)};
  return r.copy;
}

Precision parse_precision(const std::string& name) {
  if (name == "f32") return Precision::f32;
  if (name == "bf16") return Precision::bf16;
  fail(cat("precision must be f32 or bf16, got '", name, "'"));
}

const char* precision_name(Precision precision) { return precision == Precision::bf16 ? "bf16" : "f32"; }

}  // namespace qkgrad
