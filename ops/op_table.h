// The one list of every differentiable op, with its forward and backward formula. The
// gradient-check program, the test suite and docs/ops.md are all generated from it:
// tests/test_gradcheck.cpp fails if an op here has no check case, and tests/test_docs.cpp fails
// if docs/ops.md differs from `qkgrad-gradcheck --markdown`.
//
// The elementwise maps of one tensor (neg, exp, ..., clamp) are not listed here but in
// QKGRAD_UNARY_OPS (core/unary_functions.h), beside their functors; op_table() puts them after
// div. To add an op: write it in ops/ (forward, backward, math comment), add a line here, and
// add at least one case in ops/checks/. See README.md, "Adding an op".
//
// Notation: x̄ is d(loss)/dx; sum_to(t, x) sums t over the axes along which x was broadcast.
#pragma once

#include <string>
#include <vector>

// X(name, forward, backward)
#define QKGRAD_DIFFERENTIABLE_OPS(X)                                                          \
  X(add, "c = a + b (broadcasting)", "ā = sum_to(c̄, a), b̄ = sum_to(c̄, b)")                  \
  X(sub, "c = a − b (broadcasting)", "ā = sum_to(c̄, a), b̄ = −sum_to(c̄, b)")                 \
  X(mul, "c = a ⊙ b (broadcasting)", "ā = sum_to(c̄ ⊙ b, a), b̄ = sum_to(c̄ ⊙ a, b)")         \
  X(div, "c = a / b (broadcasting)", "ā = sum_to(c̄ / b, a), b̄ = −sum_to(c̄ ⊙ c / b, b)")     \
  X(where, "y = m ? a : b (broadcasting; m has no gradient)",                                 \
    "ā = sum_to(m ? ȳ : 0, a), b̄ = sum_to(m ? 0 : ȳ, b)")                                    \
  X(masked_fill, "y = m ? v : x (m broadcast to x)", "x̄ = m ? 0 : ȳ (through where)")       \
  X(sum, "y = Σ x, over all elements or one axis (keepdim optional)",                         \
    "x̄ = ȳ broadcast back over the summed axis")                                              \
  X(mean, "y = (1/n) Σ x, over all elements or one axis", "x̄ = ȳ / n broadcast back")        \
  X(max, "y = max x, over all elements or one axis", "x̄ = ȳ at the first argmax, 0 elsewhere") \
  X(logsumexp, "y = log Σ eˣ = m + log Σ e^(x−m), m = max x", "x̄ = ȳ ⊙ e^(x − y)")          \
  X(norm, "y = ‖x‖₂ = √(Σ x²), over all elements or one axis",                                \
    "x̄ = ȳ ⊙ x / y (0 where y = 0)")                                                          \
  X(matmul, "C = op(A) op(B), op = identity or transpose (a flag); 2-D, batched, or shared 2-D", \
    "d op(A) = C̄ op(B)ᵀ, d op(B) = op(A)ᵀ C̄ (summed over the batch for a shared operand)")  \
  X(linear, "y = x Wᵀ + b over the last dim (one GEMM, bias folded in)",                       \
    "x̄ = ȳ W, W̄ = ȳᵀ x, b̄ = Σ_rows ȳ")                                                      \
  X(softmax, "y = e^(x−m) / Σ e^(x−m), m = max x, over the last axis", "x̄ = y ⊙ (ȳ − Σ ȳ ⊙ y)") \
  X(log_softmax, "y = x − m − log Σ e^(x−m), over the last axis", "x̄ = ȳ − softmax(x) Σ ȳ")      \
  X(layer_norm, "y = γ ⊙ (x − μ)/√(σ² + ε) + β, per row (biased σ²)",                          \
    "x̄ = r(h − mean h − x̂ mean(h ⊙ x̂)), h = ȳ ⊙ γ, r = 1/√(σ²+ε); γ̄ = Σ ȳ ⊙ x̂; β̄ = Σ ȳ")        \
  X(rms_norm, "y = γ ⊙ x/√(mean(x²) + ε), per row (RMSNorm)",                                      \
    "x̄ = r(h − x̂ mean(h ⊙ x̂)), h = ȳ ⊙ γ, x̂ = x r, r = 1/√(mean(x²)+ε); γ̄ = Σ ȳ ⊙ x̂")            \
  X(l2_normalize, "y = x / max(‖x‖, ε), per row",                                               \
    "x̄ = (ȳ − y (y·ȳ)) / ‖x‖ if ‖x‖ > ε, else ȳ / ε")                                          \
  X(scale_norm, "y = g · x / max(‖x‖, ε), per row, scalar g",                                   \
    "ḡ = Σ ȳ ⊙ u (u = x / max(‖x‖, ε)); x̄ = l2_normalize backward of g ȳ")                     \
  X(cross_entropy, "L = Σ_rows lse(z) − (1−ε) z_t − (ε/V) Σ z  (q = (1−ε) onehot + ε/V; ignored rows 0); z-loss: + λ lse(z)²", \
    "z̄ = L̄ (softmax(z) − q) on non-ignored rows; z-loss: + L̄ 2λ lse(z) softmax(z)")                \
  X(nll, "L = −Σ_rows log_p[t] (ignored rows 0; gather + mask + sum)", "log_p̄[t] = −L̄")        \
  X(dropout, "y = m ⊙ x / (1 − p), m ~ Bernoulli(1 − p) from the Philox stream",                 \
    "x̄ = m ⊙ ȳ / (1 − p) (m kept as bits: 1/32 of x's float32 memory)")                      \
  X(rope, "per head, pair (i, i + d/2) at position p turned by pθᵢ, θᵢ = base^(−2i/d)",             \
    "x̄ = ȳ turned by −pθᵢ (the transposed rotation)")                                            \
  X(attention_qknorm, "per head: S = g q̂k̂ᵀ + M (q̂ = q/max(‖q‖, ε)), P = softmax(S), O = dropout(P) v", \
    "v̄ = P'ᵀŌ; dS = P ⊙ (dP − rowsum(Ō ⊙ O)); ḡ = Σ dS ⊙ q̂k̂ᵀ; q̂̄ = g dS k̂, k̂̄ = g dSᵀq̂; q̄ = (q̂̄ − q̂(q̂·q̂̄))/‖q‖") \
  X(attention_scaled_dot, "per head: S = q kᵀ/√d + M, P = softmax(S), O = dropout(P) v",        \
    "v̄ = P'ᵀŌ; dS = P ⊙ (dP − rowsum(Ō ⊙ O)); q̄ = dS k/√d; k̄ = dSᵀ q/√d")                       \
  X(attention_rms_qknorm, "per head: q̂ = γ_q ⊙ q/rms(q), k̂ likewise; S = q̂k̂ᵀ/√d + M; then as scaled_dot", \
    "q̂̄, k̂̄ as scaled_dot's q̄, k̄; q̄ = rms_norm backward of q̂̄; γ̄_q = Σ q̂̄ ⊙ q/rms(q)")              \
  X(attention_layer_qknorm, "per head: q̂ = γ_q ⊙ (q − μ)/σ + β_q, k̂ likewise; S = q̂k̂ᵀ/√d + M; then as scaled_dot", \
    "q̂̄, k̂̄ as scaled_dot's q̄, k̄; q̄ = layer_norm backward of q̂̄; γ̄_q, β̄_q as layer_norm's")       \
  X(reshape, "y = x with another shape (shares storage)", "x̄ = reshape(ȳ, x.shape)")          \
  X(permute, "y = x with axes reordered (a copy)", "x̄ = permute(ȳ, inverse permutation)")     \
  X(transpose, "y = x with two axes swapped (a permute)", "x̄ = transpose(ȳ) (through permute)") \
  X(concat, "y = [x₁ x₂ …] along an axis", "x̄ᵢ = the slice of ȳ where xᵢ was placed")          \
  X(slice, "y = x[start:end] along an axis (a copy)", "x̄ = ȳ inside the window, 0 outside")  \
  X(split, "[y₁, y₂, …] = consecutive slices of x along an axis", "x̄ = Σᵢ ȳᵢ in its window (through slice)") \
  X(pad, "y = x with constant entries before and after, along an axis", "x̄ = the middle of ȳ") \
  X(index_select, "y[.., j, ..] = x[.., ids[j], ..]", "x̄[.., r, ..] = Σ_{j: ids[j] = r} ȳ[.., j, ..]") \
  X(gather, "y[o, j, i] = x[o, index[o, j, i], i]", "x̄[o, r, i] = Σ_{j: index[o, j, i] = r} ȳ[o, j, i]") \
  X(embedding, "y[p] = W[ids[p]] (W: [V, D])", "W̄[r] = Σ_{p: ids[p] = r} ȳ[p] (repeats add up)")    \
  X(to_dtype, "y = x converted between f32, f64 and bf16 (to bf16: rounded to nearest, ties to even)", "x̄ = ȳ converted back")

namespace qkgrad {

struct OpInfo {
  std::string name;
  std::string forward;
  std::string backward;
};

const std::vector<OpInfo>& op_table();

// docs/ops.md, generated from the table.
std::string op_table_markdown();

}  // namespace qkgrad
