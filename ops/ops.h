// The op library: every differentiable function on tensors.
//
// Each op checks its inputs (a clear Error naming the op and the shapes), computes its forward
// pass with backend kernels, and, when an input requires grad, records its hand-derived
// backward on the tape. The math of each backward sits in a comment beside it; the full list
// of ops is ops/op_table.h, and every one has a float64 finite-difference check
// (ops/checks/, run by qkgrad-gradcheck).
#pragma once

#include <vector>

#include "core/tensor.h"
#include "core/unary_functions.h"  // QKGRAD_UNARY_OPS
#include "ops/attention.h"  // the fused attention op and its KV cache

namespace qkgrad {

// ---- elementwise, with NumPy broadcasting (ops/elementwise.cpp) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// The unary maps without parameters, one function each, `Tensor NAME(const Tensor& x)`:
// neg, exp, log, tanh, relu, sqrt, rsqrt (1/√x), sigmoid, gelu (the tanh approximation), silu
// (x·σ(x)), square. They are declared from the list QKGRAD_UNARY_OPS, whose functors hold
// each f and f′ (core/unary_functions.h).
#define QKGRAD_UNARY_DECLARE_0(name) Tensor name(const Tensor& x);
#define QKGRAD_UNARY_DECLARE_1(name)
#define QKGRAD_UNARY_DECLARE_2(name)
#define QKGRAD_UNARY_DECLARE(name, functor, parameters, forward, backward) QKGRAD_UNARY_DECLARE_##parameters(name)
QKGRAD_UNARY_OPS(QKGRAD_UNARY_DECLARE)
#undef QKGRAD_UNARY_DECLARE
#undef QKGRAD_UNARY_DECLARE_0
#undef QKGRAD_UNARY_DECLARE_1
#undef QKGRAD_UNARY_DECLARE_2
Tensor pow(const Tensor& x, double exponent);
Tensor clamp(const Tensor& x, double low, double high);
Tensor add_scalar(const Tensor& x, double s);
Tensor mul_scalar(const Tensor& x, double s);
// mask ? a : b, broadcasting all three; mask (any dtype, nonzero = true) gets no gradient.
Tensor where(const Tensor& mask, const Tensor& a, const Tensor& b);
// mask ? value : x, mask broadcast to x's shape.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
// A number next to a tensor: add_scalar / mul_scalar (x / s is x · (1/s)).
Tensor operator+(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(const Tensor& a, double b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(const Tensor& a, double b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(const Tensor& a, double b);
Tensor operator/(double a, const Tensor& b);

// ---- reductions (ops/reduce.cpp) ----
Tensor sum(const Tensor& x);                                  // all elements -> shape []
Tensor sum(const Tensor& x, int axis, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int axis, bool keepdim = false);
Tensor max(const Tensor& x);                                  // gradient to the (first) argmax
Tensor max(const Tensor& x, int axis, bool keepdim = false);
Tensor logsumexp(const Tensor& x);                            // log Σ eˣ, computed stably
Tensor logsumexp(const Tensor& x, int axis, bool keepdim = false);
Tensor norm(const Tensor& x);                                 // l2 norm √(Σ x²)
Tensor norm(const Tensor& x, int axis, bool keepdim = false);

// Σ x² over every element of every tensor in xs, in float64 (no overflow) and a fixed order,
// as a number on the host: not differentiable (gradient-norm clipping, finiteness checks). One
// backend call per device the tensors are on (normally one), in the order the devices first
// appear in xs.
double sum_of_squares(const std::vector<Tensor>& xs);

// ---- linear algebra (ops/matmul.cpp) ----
// op(a): [..., m, k], op(b): [..., k, n] -> [..., m, n], where op(x) is x, or x with its last
// two dims swapped when its trans flag is set (a GEMM flag: no copy). The leading (batch) dims
// of a and b must be equal, or one side must be a plain 2-D matrix shared by the whole batch.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// The same product in mixed precision (CPU): a and b (f32) are rounded to bfloat16, multiplied
// with float32 accumulation, and the result is f32. The backward rounds dC to bf16 once and
// multiplies it with the saved bf16 operands, writing f32 gradients:
//   dA = bf16(dC) · bf16(op(B))ᵀ,  dB = bf16(op(A))ᵀ · bf16(dC)   (transposed back as in matmul)
// which is the rounding PyTorch's autocast applies; the gradients themselves stay float32.
Tensor matmul_bf16(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// y = x Wᵀ + b over the last dim: x [..., in], weight [out, in], bias [out] (or undefined).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- normalisation over the last axis (ops/normalization.cpp) ----
Tensor softmax(const Tensor& x);      // stable; a row of all -inf gives zeros
Tensor log_softmax(const Tensor& x);  // stable; a row of all -inf gives -inf
// gamma, beta: [d] where d = x's last dim; biased variance, as in the LayerNorm paper.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Tensor& gamma, double eps = 1e-6);  // γ ⊙ x / √(mean(x²) + eps)
Tensor l2_normalize(const Tensor& x, double eps = 1e-12);  // x / max(‖x‖, eps)
Tensor scale_norm(const Tensor& x, const Tensor& g, double eps = 1e-5);  // g · x / max(‖x‖, eps)

// ---- losses (ops/loss.cpp) ----
// The summed loss over the rows whose target is not ignore_index, and how many rows that was.
struct LossSum {
  Tensor sum;      // shape [], differentiable
  int64_t tokens;  // non-ignored rows
};
// Fused log_softmax + label smoothing: q = (1 − ε)·onehot(target) + ε/V over V classes.
// logits [..., V], targets (i64) [...]. z_loss λ > 0 adds λ·lse(z)² per row (PaLM's z-loss:
// keeps the softmax normaliser near 1; included in `sum`).
LossSum cross_entropy(const Tensor& logits, const Tensor& targets, double smoothing = 0.0,
                      int64_t ignore_index = -1, double z_loss = 0.0);
// −Σ log_probs[target] over non-ignored rows; log_probs [..., V], targets (i64) [...].
LossSum nll(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index = -1);

// ---- regularisation and positions (ops/regularization.cpp) ----
// Inverted dropout with a mask from gen's Philox stream (reproducible for a seed and step).
// Identity when !training or p == 0.
Tensor dropout(const Tensor& x, double p, Generator& gen, bool training = true);
// ids (i64) with each replaced by `replacement` with probability p. No gradient.
Tensor word_dropout(const Tensor& ids, double p, int64_t replacement, Generator& gen, bool training = true);
// [length, dim]: sin on even dims, cos on odd dims (Vaswani et al.). No gradient.
Tensor sinusoidal_positions(int64_t length, int64_t dim, DType dtype = DType::f32, Device device = Device::cpu);

// ---- rotary position embeddings (ops/rope.cpp) ----
// x [B, T, H·d] (heads side by side, as attention takes q and k), d even: each head's pair
// (i, i + d/2) at position p = first_position + t turned by p·base^(−2i/d) (RoFormer, in the
// half-split form of GPT-NeoX and Llama). The backward turns ȳ back.
Tensor rope(const Tensor& x, int64_t heads, int64_t first_position = 0, double base = 10000.0);

// ---- data movement (ops/shape_ops.cpp, ops/index_ops.cpp) ----
Tensor permute(const Tensor& x, const std::vector<int>& dims);  // y axis i = x axis dims[i]; copies
Tensor transpose(const Tensor& x, int a, int b);                // swaps two axes; copies
Tensor concat(const std::vector<Tensor>& xs, int axis);
Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end);  // [start, end); copies
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int axis);
Tensor pad(const Tensor& x, int axis, int64_t before, int64_t after, double value = 0.0);
// ids: 1-D i64; picks entries along axis.
Tensor index_select(const Tensor& x, int axis, const Tensor& ids);
// index: i64 with x's shape except along axis; y[o, j, i] = x[o, index[o, j, i], i].
Tensor gather(const Tensor& x, int axis, const Tensor& index);
// weight [V, D], ids (i64, any shape) -> [ids..., D]; repeated ids accumulate gradient.
Tensor embedding(const Tensor& weight, const Tensor& ids);

// ---- shape and type (ops/convert.cpp; also as Tensor::reshape and Tensor::to) ----
Tensor reshape(const Tensor& x, const Shape& shape);  // same numel; shares storage
Tensor to_dtype(const Tensor& x, DType dtype);

}  // namespace qkgrad
