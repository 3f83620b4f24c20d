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
  if (g_guard == nullptr) return t.to(DType::bf16);
  auto& cache = g_guard->rounded_;
  MixedPrecision::Rounded& r = cache[t.impl()];
  if (!r.source.expired() && r.version == t.version()) {
    if (std::shared_ptr<TensorImpl> copy = r.copy.lock()) return Tensor(std::move(copy));
  }
  const Tensor copy = t.to(DType::bf16);
  const bool weight = t.is_leaf() && t.requires_grad();
  r = {t.impl_ptr(), t.version(), copy.impl_ptr(), weight ? copy : Tensor()};
  return copy;
}

Precision parse_precision(const std::string& name) {
  if (name == "f32") return Precision::f32;
  if (name == "bf16") return Precision::bf16;
  fail(cat("precision must be f32 or bf16, got '", name, "'"));
}

const char* precision_name(Precision precision) { return precision == Precision::bf16 ? "bf16" : "f32"; }

}  // namespace qkgrad
