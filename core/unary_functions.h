// Every elementwise function of one tensor, written once: f and its derivative f′ side by side,
// as scalar functors that compile for the host and, under nvcc, for the GPU. The CPU kernels
// (backends/cpu/cpu_elementwise.cpp), the CUDA kernels (backends/cuda/cuda_elementwise.cu) and
// the ops (ops/elementwise.cpp) all take them from here, and the list QKGRAD_UNARY_OPS at the
// end generates the UnaryOp enum, the ops' names, their rows of the op table (ops/op_table.h,
// docs/ops.md) and the kernels' dispatch.
//
// A functor has
//   reads                  what f′ needs: the input x, the output y = f(x), or nothing
//   f(x, a, b)             y = f(x); a, b are the op's parameters (pow's p, clamp's lo/hi)
//   grad(ȳ, x, y, a, b)    x̄ = ȳ · f′(x) for one element (it reads only what `reads` names; the
//                          other argument is 0). Written out rather than as ȳ times a separate
//                          f′, so that a mask stays a mask: relu passes ȳ or 0, never inf·0.
// f is written so that NaN stays NaN (a NaN input must never come out as a clean 0).
//
// Adding an elementwise op is three edits: its functor below (f and f′ with the math), its line
// in QKGRAD_UNARY_OPS, and a finite-difference case in ops/checks/elementwise_cases.cpp; then
// regenerate docs/ops.md (README.md, "Adding an op").
#pragma once

#include <math.h>

#include "core/fast_math.h"
#include "core/host_device.h"

namespace qkgrad {

// What the derivative of a unary op reads, and so what the op saves for backward.
enum class Reads { nothing, x, y };

namespace unary {

// The math library in each precision: glibc's on the host, CUDA's on the device (they agree
// to an ulp or so), except exp and tanh of a float on the host: there core/fast_math.h's, which
// vectorise (glibc's are a call per element) and are within a few ulp. sqrt is IEEE-exact on both.
QKGRAD_HOST_DEVICE inline float exp_of(float v) {
#if defined(__CUDA_ARCH__)
  return ::expf(v);
#else
  return exp_fast(v);
#endif
}
QKGRAD_HOST_DEVICE inline double exp_of(double v) { return ::exp(v); }
QKGRAD_HOST_DEVICE inline float log_of(float v) { return ::logf(v); }
QKGRAD_HOST_DEVICE inline double log_of(double v) { return ::log(v); }
QKGRAD_HOST_DEVICE inline float tanh_of(float v) {
#if defined(__CUDA_ARCH__)
  return ::tanhf(v);
#else
  return tanh_fast(v);
#endif
}
QKGRAD_HOST_DEVICE inline double tanh_of(double v) { return ::tanh(v); }
QKGRAD_HOST_DEVICE inline float sqrt_of(float v) { return ::sqrtf(v); }
QKGRAD_HOST_DEVICE inline double sqrt_of(double v) { return ::sqrt(v); }
QKGRAD_HOST_DEVICE inline float pow_of(float v, float e) { return ::powf(v, e); }
QKGRAD_HOST_DEVICE inline double pow_of(double v, double e) { return ::pow(v, e); }

// σ(x) without overflow: with e = e^−|x| (at most 1), σ = 1/(1 + e) for x ≥ 0 and e/(1 + e)
// for x < 0, never e⁻ˣ = inf. A select, not a branch, so that it vectorises; NaN stays NaN.
template <typename T>
QKGRAD_HOST_DEVICE T sigmoid_of(T x) {
  const T e = exp_of(x >= T(0) ? -x : x);
  const T s = T(1) / (T(1) + e);
  return x >= T(0) ? s : e * s;
}

// y = −x                 dy/dx = −1
struct Neg {
  static constexpr Reads reads = Reads::nothing;
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T, T) { return -x; }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T, T, T, T) { return -g; }
};

// y = eˣ                 dy/dx = eˣ = y
struct Exp {
  static constexpr Reads reads = Reads::y;
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T, T) { return exp_of(x); }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T, T y, T, T) { return g * y; }
};

// y = ln x               dy/dx = 1/x
struct Log {
  static constexpr Reads reads = Reads::x;
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T, T) { return log_of(x); }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T x, T, T, T) { return g / x; }
};

// y = tanh x             dy/dx = 1 − tanh² x = 1 − y²
struct Tanh {
  static constexpr Reads reads = Reads::y;
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T, T) { return tanh_of(x); }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T, T y, T, T) { return g * (T(1) - y * y); }
};

// y = max(x, 0)          dy/dx = [x > 0]   (x < 0 ? 0 : x keeps NaN as NaN)
struct Relu {
  static constexpr Reads reads = Reads::x;
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T, T) { return x < T(0) ? T(0) : x; }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T x, T, T, T) { return x > T(0) ? g : T(0); }
};

// y = √x                 dy/dx = 1/(2√x) = 1/(2y)
struct Sqrt {
  static constexpr Reads reads = Reads::y;
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T, T) { return sqrt_of(x); }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T, T y, T, T) { return g / (T(2) * y); }
};

// y = 1/√x               dy/dx = −x^(−3/2)/2 = −y³/2   (not the GPU's rsqrt(): it is approximate)
struct Rsqrt {
  static constexpr Reads reads = Reads::y;
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T, T) { return T(1) / sqrt_of(x); }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T, T y, T, T) { return T(-0.5) * g * y * y * y; }
};

// y = σ(x) = 1/(1 + e⁻ˣ)  dy/dx = σ(x)(1 − σ(x)) = y(1 − y)
struct Sigmoid {
  static constexpr Reads reads = Reads::y;
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T, T) { return sigmoid_of(x); }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T, T y, T, T) { return g * y * (T(1) - y); }
};

// The tanh approximation of GELU (Hendrycks & Gimpel):
//   y = x/2 · (1 + tanh u),  u = √(2/π) · (x + 0.044715 x³)
//   dy/dx = (1 + tanh u)/2 + x/2 · (1 − tanh² u) · √(2/π) · (1 + 3·0.044715 x²)
struct Gelu {
  static constexpr Reads reads = Reads::x;
  template <typename T> QKGRAD_HOST_DEVICE static T u(T x) {
    return static_cast<T>(0.7978845608028654) * (x + T(0.044715) * x * x * x);  // √(2/π) (x + 0.044715 x³)
  }
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T, T) { return T(0.5) * x * (T(1) + tanh_of(u(x))); }
  template <typename T> QKGRAD_HOST_DEVICE static T derivative(T x) {
    const T t = tanh_of(u(x));
    return T(0.5) * (T(1) + t) +
           T(0.5) * x * (T(1) - t * t) * static_cast<T>(0.7978845608028654) * (T(1) + T(3 * 0.044715) * x * x);
  }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T x, T, T, T) { return g * derivative(x); }
};

// y = x·σ(x) (SiLU, "swish")   dy/dx = σ(x) + x·σ(x)(1 − σ(x)) = σ(x)(1 + x(1 − σ(x)))
struct Silu {
  static constexpr Reads reads = Reads::x;
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T, T) { return x * sigmoid_of(x); }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T x, T, T, T) {
    const T s = sigmoid_of(x);
    return g * s * (T(1) + x * (T(1) - s));
  }
};

// y = x²                 dy/dx = 2x
struct Square {
  static constexpr Reads reads = Reads::x;
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T, T) { return x * x; }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T x, T, T, T) { return T(2) * x * g; }
};

// y = xᵖ (p = a)         dy/dx = p·xᵖ⁻¹, exactly 0 for p = 0 (no 0·inf at x = 0)
struct Pow {
  static constexpr Reads reads = Reads::x;
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T p, T) { return pow_of(x, p); }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T x, T, T p, T) {
    return p == T(0) ? T(0) : g * p * pow_of(x, p - T(1));
  }
};

// y = min(max(x, lo), hi) (lo = a, hi = b; NaN passes through)   dy/dx = [lo ≤ x ≤ hi]
struct Clamp {
  static constexpr Reads reads = Reads::x;
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T lo, T hi) { return x < lo ? lo : (x > hi ? hi : x); }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T x, T, T lo, T hi) { return x >= lo && x <= hi ? g : T(0); }
};

// y = x + s (s = a)      dy/dx = 1
struct AddScalar {
  static constexpr Reads reads = Reads::nothing;
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T s, T) { return x + s; }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T, T, T, T) { return g; }
};

// y = s·x (s = a)        dy/dx = s
struct MulScalar {
  static constexpr Reads reads = Reads::nothing;
  template <typename T> QKGRAD_HOST_DEVICE static T f(T x, T s, T) { return s * x; }
  template <typename T> QKGRAD_HOST_DEVICE static T grad(T g, T, T, T s, T) { return s * g; }
};

}  // namespace unary

// X(name, functor, parameters, forward, backward): every unary op once. `parameters` is how
// many of (a, b) the op takes; an op with none gets its function `Tensor name(const Tensor&)`
// generated (ops/ops.h, ops/elementwise.cpp); the others are written there by hand, since
// their parameters need checks. The two strings are the op table's (docs/ops.md).
#define QKGRAD_UNARY_OPS(X)                                                                          \
  X(neg, Neg, 0, "y = −x", "x̄ = −ȳ")                                                                \
  X(exp, Exp, 0, "y = eˣ", "x̄ = ȳ ⊙ y")                                                             \
  X(log, Log, 0, "y = ln x", "x̄ = ȳ / x")                                                           \
  X(tanh, Tanh, 0, "y = tanh x", "x̄ = ȳ ⊙ (1 − y²)")                                                \
  X(relu, Relu, 0, "y = max(x, 0)", "x̄ = ȳ ⊙ [x > 0]")                                              \
  X(sqrt, Sqrt, 0, "y = √x", "x̄ = ȳ / (2y)")                                                        \
  X(rsqrt, Rsqrt, 0, "y = 1/√x", "x̄ = −ȳ ⊙ y³ / 2")                                                 \
  X(sigmoid, Sigmoid, 0, "y = 1 / (1 + e⁻ˣ)", "x̄ = ȳ ⊙ y(1 − y)")                                   \
  X(gelu, Gelu, 0, "y = x/2·(1 + tanh u), u = √(2/π)(x + 0.044715x³)",                               \
    "x̄ = ȳ ⊙ ((1 + tanh u)/2 + x/2·(1 − tanh²u)·√(2/π)(1 + 3·0.044715x²))")                          \
  X(silu, Silu, 0, "y = x·σ(x)", "x̄ = ȳ ⊙ σ(x)(1 + x(1 − σ(x)))")                                   \
  X(square, Square, 0, "y = x²", "x̄ = 2x ⊙ ȳ")                                                      \
  X(pow, Pow, 1, "y = xᵖ (scalar p)", "x̄ = p·xᵖ⁻¹ ⊙ ȳ (0 when p = 0)")                               \
  X(clamp, Clamp, 2, "y = min(max(x, lo), hi)", "x̄ = ȳ ⊙ [lo ≤ x ≤ hi]")                            \
  X(add_scalar, AddScalar, 1, "y = x + s", "x̄ = ȳ")                                                 \
  X(mul_scalar, MulScalar, 1, "y = s·x", "x̄ = s·ȳ")

#define QKGRAD_UNARY_ENUM_ENTRY(name, functor, parameters, forward, backward) name,
enum class UnaryOp { QKGRAD_UNARY_OPS(QKGRAD_UNARY_ENUM_ENTRY) };
#undef QKGRAD_UNARY_ENUM_ENTRY

// Calls visit(unary::Functor{}) for `op`: the one switch over UnaryOp, shared by the kernels
// (the CUDA one instantiates a kernel per functor through it). Returns what visit returns.
template <typename Visit>
decltype(auto) visit_unary(UnaryOp op, Visit&& visit) {
  switch (op) {
#define QKGRAD_UNARY_CASE(name, functor, parameters, forward, backward) \
  case UnaryOp::name:                                                   \
    return visit(unary::functor{});
    QKGRAD_UNARY_OPS(QKGRAD_UNARY_CASE)
#undef QKGRAD_UNARY_CASE
  }
  return visit(unary::Neg{});  // not reached: every op is a case
}

}  // namespace qkgrad
