// The mixed-precision policy: which op multiplies in which precision while a MixedPrecision
// guard is alive (PyTorch's autocast lists, for this library). One table:
//
//   op                                         under MixedPrecision(Precision::bf16)
//   ------------------------------------------ ------------------------------------------------
//   linear: attention projections, feed-      bf16 operands (x and W rounded by bf16_operand
//     forward layers, the output logits        for each product), f32 accumulation and result;
//                                              the backward saves the f32 x and W and rounds
//                                              them and dY again (ops/linear.cpp); f32 grads
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

#include <string>

#include "core/tensor.h"

namespace qkgrad {

enum class Precision { f32, bf16 };

// What linear multiplies in now (on this thread).
Precision linear_precision();

// Sets the precision for the guard's lifetime (nested guards restore the outer one). A training
// step holds one guard around its forwards.
class MixedPrecision {
 public:
  explicit MixedPrecision(Precision precision);
  ~MixedPrecision();
  MixedPrecision(const MixedPrecision&) = delete;
  MixedPrecision& operator=(const MixedPrecision&) = delete;

 private:
  Precision saved_;
};

// `t` rounded to bf16 (round to nearest even), without recording: the caller's op records its
// own backward. A product's operand copy lives only as long as that product: no bf16 copy is
// saved for a backward or kept for the step, so the tape holds what it holds in float32 and the
// peak memory is float32's. The price is a rounding pass per product (x and W in the forward,
// again in the backward): bandwidth-bound passes, a few per cent of the step (docs/autodiff.md).
Tensor bf16_operand(const Tensor& t);

Precision parse_precision(const std::string& name);  // "f32" or "bf16"; else an Error naming them
const char* precision_name(Precision precision);

}  // namespace qkgrad
