// Elementwise kernels: fill, copy/convert, unary maps and their derivatives, broadcasting
// binary ops and select (where), scale and axpy, and RoPE's rotation.
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_common.h"
#include "backends/cpu/cpu_loops.h"
#include "core/row_functions.h"

namespace qkgrad {

using cpu::broadcast_apply;
using cpu::dispatch;
using cpu::map_index;

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

// y = f(x) with f from core/unary_functions.h (visit_unary picks the functor of `op`).
void CpuBackend::unary(UnaryOp op, UnaryParams p, const Tensor& x, Tensor& y) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    const T a = static_cast<T>(p.a), b = static_cast<T>(p.b);
    visit_unary(op, [&](auto fn) {
      using F = decltype(fn);
      map_index(y.data<T>(), x.numel(), [in, a, b](int64_t i) { return F::f(in[i], a, b); });
    });
  });
}

// dx = dy · f′ (written over dx, or added to it), with the functor's grad: it reads x or y
// = f(x) or neither, and the pointer it does not read may be null.
void CpuBackend::unary_backward(UnaryOp op, UnaryParams p, const Tensor* x, const Tensor* y,
                                const Tensor& dy, Tensor& dx, bool accumulate) {
  dispatch(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xs = x ? x->data<T>() : nullptr;
    const T* ys = y ? y->data<T>() : nullptr;
    const T* g = dy.data<T>();
    T* out = dx.data<T>();
    const T a = static_cast<T>(p.a), b = static_cast<T>(p.b);
    visit_unary(op, [&](auto fn) {
      using F = decltype(fn);
      auto grad = [=](int64_t i) {
        const T xi = F::reads == Reads::x ? xs[i] : T(0), yi = F::reads == Reads::y ? ys[i] : T(0);
        return F::grad(g[i], xi, yi, a, b);
      };
      if (accumulate) {
        map_index(out, dy.numel(), [out, grad](int64_t i) { return out[i] + grad(i); });
      } else {
        map_index(out, dy.numel(), grad);
      }
    });
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

// One pass over x [B, T, H·2m]: each row (b, t) takes its angles' row of the tables [T, m], and
// each head's halves turn as pairs (the SIMD loop runs over i, the pair's first index).
void CpuBackend::rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t heads, Tensor& y) {
  const int64_t time = x.size(1), width = x.size(2), m = width / heads / 2;
  const int64_t rows = time == 0 ? 0 : x.numel() / width;  // B·T
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xs = x.data<T>();
    const T* cs = cos.data<T>();
    const T* ss = sin.data<T>();
    T* ys = y.data<T>();
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T* c = cs + (r % time) * m;  // [m]: this row's time step
      const T* s = ss + (r % time) * m;
      for (int64_t h = 0; h < heads; ++h) {
        const T* x1 = xs + r * width + h * 2 * m;  // the head's first half, then its second
        const T* x2 = x1 + m;
        T* y1 = ys + r * width + h * 2 * m;
        T* y2 = y1 + m;
#pragma omp simd
        for (int64_t i = 0; i < m; ++i) {
          y1[i] = rows::rope_first(x1[i], x2[i], c[i], s[i]);
          y2[i] = rows::rope_second(x1[i], x2[i], c[i], s[i]);
        }
      }
    }
  });
}

}  // namespace qkgrad
