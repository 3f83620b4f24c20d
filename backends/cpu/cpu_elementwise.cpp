// Elementwise kernels: fill, copy/convert, unary maps and their derivatives, broadcasting
// binary ops and select (where), scale and axpy.
#include <cmath>
#include <cstring>
#include <numbers>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_common.h"
#include "backends/cpu/cpu_loops.h"

namespace qkgrad {

using cpu::broadcast_apply;
using cpu::dispatch;
using cpu::map_index;

namespace {

// The tanh approximation of GELU (Hendrycks & Gimpel):
//   gelu(x) = x/2 · (1 + tanh(u)),  u = √(2/π) · (x + 0.044715 x³)
template <typename T>
constexpr T kGeluC = static_cast<T>(0.7978845608028654);  // √(2/π)
template <typename T>
T gelu(T x) {
  return T(0.5) * x * (T(1) + std::tanh(kGeluC<T> * (x + T(0.044715) * x * x * x)));
}
// d gelu / dx = (1 + tanh u)/2 + x/2 · (1 − tanh² u) · √(2/π) · (1 + 3·0.044715 x²)
template <typename T>
T gelu_derivative(T x) {
  const T t = std::tanh(kGeluC<T> * (x + T(0.044715) * x * x * x));
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * kGeluC<T> * (T(1) + T(3 * 0.044715) * x * x);
}

// σ(x) without overflow: for x < 0, e^x / (1 + e^x) avoids e^(-x) = inf.
template <typename T>
T sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

}  // namespace

void CpuBackend::fill(Tensor& out, double value) {
  cpu::dispatch_all(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = static_cast<T>(value);
    map_index(out.data<T>(), out.numel(), [v](int64_t) { return v; });
  });
}

void CpuBackend::copy(const Tensor& src, Tensor& dst) {
  if (src.dtype() == dst.dtype()) {
    if (src.raw_data() != dst.raw_data()) std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
    return;
  }
  cpu::dispatch_all(src.dtype(), [&](auto src_tag) {
    using S = decltype(src_tag);
    const S* s = src.data<S>();
    cpu::dispatch_all(dst.dtype(), [&](auto dst_tag) {
      using D = decltype(dst_tag);
      map_index(dst.data<D>(), dst.numel(), [s](int64_t i) { return static_cast<D>(s[i]); });
    });
  });
}

void CpuBackend::unary(UnaryOp op, UnaryParams p, const Tensor& x, Tensor& y) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    const int64_t n = x.numel();
    const T a = static_cast<T>(p.a), b = static_cast<T>(p.b);
    auto run = [&](auto f) { map_index(out, n, [in, f](int64_t i) { return f(in[i]); }); };
    switch (op) {
      case UnaryOp::neg: run([](T v) { return -v; }); break;
      case UnaryOp::exp: run([](T v) { return std::exp(v); }); break;
      case UnaryOp::log: run([](T v) { return std::log(v); }); break;
      case UnaryOp::tanh: run([](T v) { return std::tanh(v); }); break;
      // v < 0 ? 0 : v keeps NaN as NaN (a NaN must never turn into a clean 0).
      case UnaryOp::relu: run([](T v) { return v < T(0) ? T(0) : v; }); break;
      case UnaryOp::sqrt: run([](T v) { return std::sqrt(v); }); break;
      case UnaryOp::rsqrt: run([](T v) { return T(1) / std::sqrt(v); }); break;
      case UnaryOp::sigmoid: run([](T v) { return sigmoid(v); }); break;
      case UnaryOp::gelu: run([](T v) { return gelu(v); }); break;
      case UnaryOp::square: run([](T v) { return v * v; }); break;
      case UnaryOp::pow: run([a](T v) { return std::pow(v, a); }); break;
      // Comparisons written so that NaN passes through unchanged.
      case UnaryOp::clamp: run([a, b](T v) { return v < a ? a : (v > b ? b : v); }); break;
      case UnaryOp::add_scalar: run([a](T v) { return v + a; }); break;
      case UnaryOp::mul_scalar: run([a](T v) { return a * v; }); break;
    }
  });
}

void CpuBackend::unary_backward(UnaryOp op, UnaryParams p, const Tensor* x, const Tensor* y,
                                const Tensor& dy, Tensor& dx, bool accumulate) {
  dispatch(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xs = x ? x->data<T>() : nullptr;
    const T* ys = y ? y->data<T>() : nullptr;
    const T* g = dy.data<T>();
    T* out = dx.data<T>();
    const int64_t n = dy.numel();
    const T a = static_cast<T>(p.a), b = static_cast<T>(p.b);
    // grad(i) = dy[i] · f'(x[i]); written over dx, or added to it.
    auto run = [&](auto grad) {
      if (accumulate) {
        map_index(out, n, [out, grad](int64_t i) { return out[i] + grad(i); });
      } else {
        map_index(out, n, grad);
      }
    };
    switch (op) {
      case UnaryOp::neg: run([=](int64_t i) { return -g[i]; }); break;
      case UnaryOp::exp: run([=](int64_t i) { return g[i] * ys[i]; }); break;                 // y
      case UnaryOp::log: run([=](int64_t i) { return g[i] / xs[i]; }); break;                 // 1/x
      case UnaryOp::tanh: run([=](int64_t i) { return g[i] * (T(1) - ys[i] * ys[i]); }); break;  // 1 - y²
      case UnaryOp::relu: run([=](int64_t i) { return xs[i] > T(0) ? g[i] : T(0); }); break;   // [x > 0]
      case UnaryOp::sqrt: run([=](int64_t i) { return g[i] / (T(2) * ys[i]); }); break;       // 1/(2y)
      case UnaryOp::rsqrt: run([=](int64_t i) { return T(-0.5) * g[i] * ys[i] * ys[i] * ys[i]; }); break;  // -y³/2
      case UnaryOp::sigmoid: run([=](int64_t i) { return g[i] * ys[i] * (T(1) - ys[i]); }); break;  // y(1-y)
      case UnaryOp::gelu: run([=](int64_t i) { return g[i] * gelu_derivative(xs[i]); }); break;
      case UnaryOp::square: run([=](int64_t i) { return T(2) * xs[i] * g[i]; }); break;        // 2x
      case UnaryOp::pow:  // a·x^(a-1); exactly 0 for a = 0 (no 0·inf at x = 0)
        run([=](int64_t i) { return a == T(0) ? T(0) : g[i] * a * std::pow(xs[i], a - T(1)); });
        break;
      case UnaryOp::clamp:  // 1 inside [low, high] (inclusive), 0 outside
        run([=](int64_t i) { return (xs[i] >= a && xs[i] <= b) ? g[i] : T(0); });
        break;
      case UnaryOp::add_scalar: run([=](int64_t i) { return g[i]; }); break;
      case UnaryOp::mul_scalar: run([=](int64_t i) { return a * g[i]; }); break;
    }
  });
}

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const std::array<const T*, 2> in{a.data<T>(), b.data<T>()};
    const std::array<const Shape*, 2> shapes{&a.shape(), &b.shape()};
    T* po = out.data<T>();
    using V = std::array<T, 2>;
    switch (op) {
      case BinaryOp::add: broadcast_apply(in, shapes, po, out.shape(), [](const V& v) { return v[0] + v[1]; }); break;
      case BinaryOp::sub: broadcast_apply(in, shapes, po, out.shape(), [](const V& v) { return v[0] - v[1]; }); break;
      case BinaryOp::mul: broadcast_apply(in, shapes, po, out.shape(), [](const V& v) { return v[0] * v[1]; }); break;
      case BinaryOp::div: broadcast_apply(in, shapes, po, out.shape(), [](const V& v) { return v[0] / v[1]; }); break;
    }
  });
}

void CpuBackend::where(const Tensor& mask, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const std::array<const T*, 3> in{mask.data<T>(), a.data<T>(), b.data<T>()};
    const std::array<const Shape*, 3> shapes{&mask.shape(), &a.shape(), &b.shape()};
    broadcast_apply(in, shapes, out.data<T>(), out.shape(),
                    [](const std::array<T, 3>& v) { return v[0] != T(0) ? v[1] : v[2]; });
  });
}

void CpuBackend::broadcast_to(const Tensor& x, Tensor& out) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const std::array<const T*, 1> in{x.data<T>()};
    const std::array<const Shape*, 1> shapes{&x.shape()};
    broadcast_apply(in, shapes, out.data<T>(), out.shape(), [](const std::array<T, 1>& v) { return v[0]; });
  });
}

void CpuBackend::scale(const Tensor& x, double alpha, Tensor& out) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    const T a = static_cast<T>(alpha);
    map_index(out.data<T>(), x.numel(), [in, a](int64_t i) { return a * in[i]; });
  });
}

void CpuBackend::axpy(double alpha, const Tensor& x, Tensor& y) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    const T a = static_cast<T>(alpha);
    if (alpha == 1.0) {
      map_index(out, x.numel(), [in, out](int64_t i) { return out[i] + in[i]; });
    } else {
      map_index(out, x.numel(), [in, out, a](int64_t i) { return out[i] + a * in[i]; });
    }
  });
}

}  // namespace qkgrad
