// The mixed-precision policy: which op multiplies in which precision while a MixedPrecision
// guard is alive (PyTorch's autocast lists, for this library). One table:
//
//   op                                         under MixedPrecision(Precision::bf16)
//   ------------------------------------------ ------------------------------------------------
//   linear: attention projections, feed-      bf16 operands (x and W rounded once per call),
//     forward layers, the output logits        f32 accumulation, f32 result; backward the same
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

namespace qkgrad {

enum class Precision { f32, bf16 };

// What linear multiplies in now (on this thread).
Precision linear_precision();

// Sets the precision for the guard's lifetime (nested guards restore the outer one).
class MixedPrecision {
 public:
  explicit MixedPrecision(Precision precision);
  ~MixedPrecision();
  MixedPrecision(const MixedPrecision&) = delete;
  MixedPrecision& operator=(const MixedPrecision&) = delete;

 private:
  Precision saved_;
};

Precision parse_precision(const std::string& name);  // "f32" or "bf16"; else an Error naming them
const char* precision_name(Precision precision);

}  // namespace qkgrad
