// The per-element formulas of the fused row ops (softmax, log_softmax, layer_norm, rms_norm,
// l2_normalize, the label-smoothed cross-entropy, rope, the fused attention's backward), written once
// and shared by the CPU kernels (backends/cpu/cpu_norm.cpp, cpu_loss.cpp, cpu_attention.cpp) and
// the CUDA kernels (backends/cuda/cuda_norm.cu, cuda_loss.cu, cuda_attention.cu). Each backend gathers a row's statistics its own way (OpenMP threads and SIMD
// sums on the CPU, warp and block reductions on the GPU); then both apply these, element by
// element. The names of the equations are those of docs/autodiff.md, where they are derived.
#pragma once

#include "core/host_device.h"

namespace qkgrad::rows {

// softmax backward ("softmax"): x̄ᵢ = yᵢ (ȳᵢ − s), with s = Σⱼ ȳⱼ yⱼ of the row.
template <typename T>
QKGRAD_HOST_DEVICE T softmax_grad(T y, T dy, T s) {
  return y * (dy - s);
}

// log_softmax backward ("log_softmax"): x̄ᵢ = ȳᵢ − pᵢ s, with pᵢ = e^yᵢ (the softmax) and s = Σⱼ ȳⱼ.
template <typename T>
QKGRAD_HOST_DEVICE T log_softmax_grad(T p, T dy, T s) {
  return dy - p * s;
}

// layer_norm ("layer_norm"): y = x̂ γ + β with x̂ = (x − μ) r, r = (σ² + ε)^(−1/2).
template <typename T>
QKGRAD_HOST_DEVICE T layer_norm_value(T x, T mean, T rstd, T gamma, T beta) {
  return (x - mean) * rstd * gamma + beta;
}
// ... and its backward: x̄ = r (h − mean(h) − x̂ mean(h ⊙ x̂)), with h = ȳ ⊙ γ; mean_h and
// mean_hx are the row's mean(h) and mean(h ⊙ x̂).
template <typename T>
QKGRAD_HOST_DEVICE T layer_norm_grad(T x, T dy, T gamma, T mean, T rstd, T mean_h, T mean_hx) {
  const T xhat = (x - mean) * rstd;
  return rstd * (dy * gamma - mean_h - xhat * mean_hx);
}

// rms_norm ("rms_norm", RMSNorm): y = x r γ with r = (mean(x²) + ε)^(−1/2): layer_norm
// without the mean and without β.
template <typename T>
QKGRAD_HOST_DEVICE T rms_norm_value(T x, T rstd, T gamma) {
  return x * rstd * gamma;
}
// ... and its backward: x̄ = r (h − x̂ mean(h ⊙ x̂)), with h = ȳ ⊙ γ and x̂ = x r; mean_hx is the
// row's mean(h ⊙ x̂).
template <typename T>
QKGRAD_HOST_DEVICE T rms_norm_grad(T x, T dy, T gamma, T rstd, T mean_hx) {
  return rstd * (dy * gamma - x * rstd * mean_hx);
}

// l2_normalize backward ("l2_normalize"): x̄ = (ȳ − y (y·ȳ)) / n above ε, ȳ/ε at or below it;
// inv = 1/max(n, ε), and dot = y·ȳ above ε, 0 at or below.
template <typename T>
QKGRAD_HOST_DEVICE T l2_normalize_grad(T y, T dy, T inv, T dot) {
  return inv * (dy - y * dot);
}

// cross_entropy ("cross_entropy"): the loss of a row with q = on·onehot(t) + off (on = 1 − ε,
// off = ε/V): lse − on·z_t − off·Σ z. A term with weight 0 is left out rather than multiplied:
// a logit of −∞ (a masked class) would make 0 · (−∞) = NaN.
template <typename T>
QKGRAD_HOST_DEVICE T smoothed_cross_entropy(T lse, T z_target, T sum_z, T on, T off) {
  T value = lse;
  if (on != T(0)) value -= on * z_target;
  if (off != T(0)) value -= off * sum_z;
  return value;
}
// ... and its backward, ∂loss/∂z_c = p_c − q_c scaled by the incoming gradient: scale·(p − off),
// minus scale·on for the target class.
template <typename T>
QKGRAD_HOST_DEVICE T smoothed_cross_entropy_grad(T scale, T p, T off, bool is_target, T on) {
  T g = scale * (p - off);  // p − ε/V
  if (is_target) g -= scale * on;  // − (1 − ε)
  return g;
}

// rope ("RoPE"): the pair (x₁, x₂) = (x[i], x[i + m]) of a head turned by the angle whose cosine
// and sine are c and s: y₁ = x₁c − x₂s, y₂ = x₂c + x₁s. With s negated it turns back: the backward.
template <typename T>
QKGRAD_HOST_DEVICE T rope_first(T x1, T x2, T c, T s) {
  return x1 * c - x2 * s;
}
template <typename T>
QKGRAD_HOST_DEVICE T rope_second(T x1, T x2, T c, T s) {
  return x2 * c + x1 * s;
}

// The fused attention's backward, per element (equations of docs/qknorm-attention.md):
// (11) dS_ij = P_ij (dP_ij − D_i), with D_i = dout_i · out_i.
template <typename T>
QKGRAD_HOST_DEVICE T attention_ds(T p, T dp, T delta) {
  return p * (dp - delta);
}
// (14) back through x̂ = r·x, r = 1/max(‖x‖, eps), with the gradient of x̂ given as gain·grad:
//   dx = r (gain·grad − x̂ along), along = x̂ · (gain·grad) when ‖x‖ > eps, else 0
// (below eps, x̂ = x/eps is linear in x and nothing is removed).
template <typename T>
QKGRAD_HOST_DEVICE T through_norm_along(T norm, T eps, T dot) {
  return norm > eps ? dot : T(0);
}
template <typename T>
QKGRAD_HOST_DEVICE T through_norm_grad(T x, T r, T gain, T grad, T along) {
  return r * (gain * grad - x * r * along);
}

}  // namespace qkgrad::rows
