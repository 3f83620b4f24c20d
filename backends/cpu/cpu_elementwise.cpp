// Elementwise kernels: fill, copy/cast, unary maps and their derivatives, broadcasting binary
// ops, scale and axpy. Each is a flat loop over contiguous memory that OpenMP splits into equal
// static chunks and the compiler vectorises (`omp simd`).
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_common.h"

namespace qkgrad {

using cpu::dispatch;

namespace {

// out[i] = f(i) for i < n.
template <typename T, typename F>
void map_index(T* out, int64_t n, F f) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) out[i] = f(i);
}

// out = f(a, b) where a and b broadcast to out_shape. Rows of the last dimension are the unit
// of work; inside a row, a and b advance with stride 0 (broadcast) or their own stride.
template <typename T, typename F>
void broadcast_map(const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out,
                   const Shape& out_shape, F f) {
  const int64_t n = out_shape.numel();
  if (a_shape == out_shape && b_shape == out_shape) {
    map_index(out, n, [&](int64_t i) { return f(a[i], b[i]); });
    return;
  }
  if (a_shape == out_shape && b_shape.numel() == 1) {
    const T bv = b[0];
    map_index(out, n, [&](int64_t i) { return f(a[i], bv); });
    return;
  }
  if (b_shape == out_shape && a_shape.numel() == 1) {
    const T av = a[0];
    map_index(out, n, [&](int64_t i) { return f(av, b[i]); });
    return;
  }
  const int rank = out_shape.rank();
  const cpu::BroadcastStrides sa = cpu::broadcast_strides(a_shape, out_shape);
  const cpu::BroadcastStrides sb = cpu::broadcast_strides(b_shape, out_shape);
  const int64_t inner = out_shape[rank - 1];
  const int64_t rows = inner == 0 ? 0 : n / inner;
  const int64_t step_a = sa.stride[rank - 1], step_b = sb.stride[rank - 1];
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t offset_a = 0, offset_b = 0, rest = row;
    for (int axis = rank - 2; axis >= 0; --axis) {
      const int64_t coord = rest % out_shape[axis];
      rest /= out_shape[axis];
      offset_a += coord * sa.stride[axis];
      offset_b += coord * sb.stride[axis];
    }
    T* out_row = out + row * inner;
    for (int64_t j = 0; j < inner; ++j) out_row[j] = f(a[offset_a + j * step_a], b[offset_b + j * step_b]);
  }
}

}  // namespace

void CpuBackend::fill(Tensor& out, double value) {
  dispatch(out.dtype(), [&](auto tag) {
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
  dispatch(src.dtype(), [&](auto src_tag) {
    using S = decltype(src_tag);
    const S* s = src.data<S>();
    dispatch(dst.dtype(), [&](auto dst_tag) {
      using D = decltype(dst_tag);
      map_index(dst.data<D>(), dst.numel(), [s](int64_t i) { return static_cast<D>(s[i]); });
    });
  });
}

void CpuBackend::unary(UnaryOp op, const Tensor& x, Tensor& y) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    const int64_t n = x.numel();
    switch (op) {
      case UnaryOp::neg: map_index(out, n, [in](int64_t i) { return -in[i]; }); break;
      case UnaryOp::exp: map_index(out, n, [in](int64_t i) { return std::exp(in[i]); }); break;
      case UnaryOp::log: map_index(out, n, [in](int64_t i) { return std::log(in[i]); }); break;
      case UnaryOp::tanh: map_index(out, n, [in](int64_t i) { return std::tanh(in[i]); }); break;
      // x < 0 ? 0 : x keeps NaN as NaN (a NaN must never turn into a clean 0).
      case UnaryOp::relu: map_index(out, n, [in](int64_t i) { return in[i] < T(0) ? T(0) : in[i]; }); break;
    }
  });
}

void CpuBackend::unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy,
                                Tensor& dx, bool accumulate) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xs = x.data<T>();
    const T* ys = y.data<T>();
    const T* g = dy.data<T>();
    T* out = dx.data<T>();
    const int64_t n = x.numel();
    auto run = [&](auto derivative_times_g) {
      if (accumulate) {
        map_index(out, n, [&](int64_t i) { return out[i] + derivative_times_g(i); });
      } else {
        map_index(out, n, derivative_times_g);
      }
    };
    switch (op) {
      case UnaryOp::neg: run([g](int64_t i) { return -g[i]; }); break;                    // d(-x) = -1
      case UnaryOp::exp: run([g, ys](int64_t i) { return g[i] * ys[i]; }); break;         // d e^x = e^x
      case UnaryOp::log: run([g, xs](int64_t i) { return g[i] / xs[i]; }); break;         // d log x = 1/x
      case UnaryOp::tanh: run([g, ys](int64_t i) { return g[i] * (T(1) - ys[i] * ys[i]); }); break;
      case UnaryOp::relu: run([g, xs](int64_t i) { return xs[i] > T(0) ? g[i] : T(0); }); break;
    }
  });
}

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    switch (op) {
      case BinaryOp::add: broadcast_map(pa, a.shape(), pb, b.shape(), po, out.shape(), [](T u, T v) { return u + v; }); break;
      case BinaryOp::sub: broadcast_map(pa, a.shape(), pb, b.shape(), po, out.shape(), [](T u, T v) { return u - v; }); break;
      case BinaryOp::mul: broadcast_map(pa, a.shape(), pb, b.shape(), po, out.shape(), [](T u, T v) { return u * v; }); break;
      case BinaryOp::div: broadcast_map(pa, a.shape(), pb, b.shape(), po, out.shape(), [](T u, T v) { return u / v; }); break;
    }
  });
}

void CpuBackend::broadcast_to(const Tensor& x, Tensor& out) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    // Broadcast against a scalar zero that is never read: f ignores its second argument.
    const T unused = T(0);
    broadcast_map(px, x.shape(), &unused, Shape{}, out.data<T>(), out.shape(), [](T u, T) { return u; });
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
