// The mixed-precision policy: which op multiplies in which precision while a MixedPrecision
// guard is alive (PyTorch's autocast lists, for this library). One table:
//
//   op                                         under MixedPrecision(Precision::bf16)
//   ------------------------------------------ ------------------------------------------------
//   linear: attention projections, feed-      bf16 operands (each x and W rounded once per
//     forward layers, the output logits        guard: bf16_operand), f32 accumulation and
//                                              result; backward the same
//                                              with dY rounded once (ops/linear.cpp); f32 grads
//   matmul_bf16                                always bf16 (it is the explicit form)
//   attention (the fused op: QKᵀ, softmax, PV) f32 (its products in bf16: not yet)
//   norms, softmax, dropout, the loss,         f32: sums and exponentials need float32's
//     embeddings, the optimizer                mantissa; the master weights and Adam's moments
//                                              stay f32 (docs/autodiff.md, Mixed precision)
//
// The same policy on both backends: oneDNN's bf16 matmul on the CPU (AVX512_BF16 or AMX),
// cuBLAS's bf16 GEMMs (cublasGemmEx, tensor cores) on CUDA. Outside a guard (and for f64
// tensors) every op computes in its inputs' dtype. The decision is made in the forward and kept
// by the op's backward, so backward() may run after the guard is gone.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "core/tensor.h"

namespace qkgrad {

enum class Precision { f32, bf16 };

// What linear multiplies in now (on this thread).
Precision linear_precision();

// Sets the precision for the guard's lifetime (nested guards restore the outer one). A training
// step holds one guard around all its forwards (every micro-batch of --accumulate), so that a
// weight used by several forwards, or twice in one, is rounded once per step, and an activation
// read by several linear layers (x by the q, k and v projections; the encoder's output by every
// decoder layer's k and v) is rounded once, its one copy saved for all their backwards.
class MixedPrecision {
 public:
  explicit MixedPrecision(Precision precision);
  ~MixedPrecision();
  MixedPrecision(const MixedPrecision&) = delete;
  MixedPrecision& operator=(const MixedPrecision&) = delete;

 private:
  friend Tensor bf16_operand(const Tensor& t);
  struct Rounded {
    std::weak_ptr<TensorImpl> source;  // expired: its address may belong to another tensor now
    uint64_t version = 0;              // the source's storage version when rounded
    std::weak_ptr<TensorImpl> copy;    // bf16; alive while a backward saves it (or `held` does)
    Tensor held;                       // a weight's copy, kept for the whole guard
  };
  Precision saved_;
  MixedPrecision* outer_;
  std::unordered_map<const TensorImpl*, Rounded> rounded_;
};

// `t` rounded to bf16, without recording (the caller's op records its own backward), once per
// innermost guard and storage version (an in-place update bumps it): a weight's copy (a leaf
// that requires grad) is kept until the guard ends; any other tensor's copy is reused while
// something (a backward) still holds it. Outside a guard: rounded on every call.
Tensor bf16_operand(const Tensor& t);

Precision parse_precision(const std::string& name);  // "f32" or "bf16"; else an Error naming them
const char* precision_name(Precision precision);

}  // namespace qkgrad
