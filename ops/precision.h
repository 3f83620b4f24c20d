// The mixed-precision policy: which op multiplies in which precision while a MixedPrecision
// guard is alive (PyTorch's autocast lists, for this library). One table:
//
//   op                                         under MixedPrecision(Precision::bf16)
//   ------------------------------------------ ------------------------------------------------
//   linear: attention projections, feed-      bf16 operands (x rounded once per call, W once
//     forward layers, the output logits        per guard: bf16_operand), f32 accumulation,
//                                              f32 result; backward the same
//                                              with dY rounded once (ops/linear.cpp); f32 grads
//   matmul_bf16                                always bf16 (it is the explicit form)
//   attention (the fused op: QKᵀ, softmax, PV) f32 (its products in bf16: not yet)
//   norms, softmax, dropout, the loss,         f32: sums and exponentials need float32's
//     embeddings, the optimizer                mantissa; the master weights and Adam's moments
//                                              stay f32 (docs/autodiff.md, Mixed precision)
//
// Outside a guard (and for f64 tensors, and on CUDA for now) every op computes in its inputs'
// dtype. The decision is made in the forward and kept by the op's backward, so backward() may
// run after the guard is gone.
#pragma once

#include <string>
#include <unordered_map>

#include "core/tensor.h"

namespace qkgrad {

enum class Precision { f32, bf16 };

// What linear multiplies in now (on this thread).
Precision linear_precision();

// Sets the precision for the guard's lifetime (nested guards restore the outer one). A training
// step holds one guard around all its forwards (every micro-batch of --accumulate), so that a
// weight used by several forwards, or twice in one, is rounded once per step.
class MixedPrecision {
 public:
  explicit MixedPrecision(Precision precision);
  ~MixedPrecision();
  MixedPrecision(const MixedPrecision&) = delete;
  MixedPrecision& operator=(const MixedPrecision&) = delete;

 private:
  friend Tensor bf16_operand(const Tensor& t);
  struct Rounded {
    Tensor source;     // held, so that its address is not reused while the entry lives
    uint64_t version;  // the source's storage version when rounded (an in-place update bumps it)
    Tensor copy;       // bf16
  };
  Precision saved_;
  MixedPrecision* outer_;
  std::unordered_map<const TensorImpl*, Rounded> weights_;  // leaves that require grad
};

// `t` rounded to bf16, without recording (the caller's op records its own backward). A weight
// (a leaf that requires grad) is rounded once per innermost guard and version, and the copy is
// reused; any other tensor is rounded on every call.
Tensor bf16_operand(const Tensor& t);

Precision parse_precision(const std::string& name);  // "f32" or "bf16"; else an Error naming them
const char* precision_name(Precision precision);

}  // namespace qkgrad
