// Elementwise CUDA kernels: unary maps and their derivatives, broadcasting binary ops and
// select (where), broadcast_to, scale and axpy. Each mirrors backends/cpu/cpu_elementwise.cpp
// formula for formula (same operations in the same order, same NaN behaviour), so the two agree
// to rounding: the GPU's exp/log/tanh/pow differ from glibc's by an ulp or so, and nvcc may fuse
// a multiply and an add into one fma.
//
// Every kernel here is a grid-stride loop with one thread per output element (cuda_common.cuh:
// grid_for, first_index, index_step); consecutive threads touch consecutive elements, so
// reads and writes are coalesced. Nothing is launched for an empty tensor.
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_common.cuh"
#include "core/backend.h"
#include "core/tensor.h"

namespace qkgrad {

namespace {

using cuda::BroadcastOffsets;
using cuda::dispatch;
using cuda::first_index;
using cuda::grid_for;
using cuda::index_step;
using cuda::kThreads;

using cuda::exp_of;
using cuda::log_of;
using cuda::pow_of;
using cuda::sqrt_of;
using cuda::tanh_of;

// The tanh approximation of GELU (Hendrycks & Gimpel), with the CPU's constants:
//   gelu(x) = x/2 · (1 + tanh(u)),  u = √(2/π) · (x + 0.044715 x³)
template <typename T>
__device__ T gelu(T x) {
  constexpr T c = static_cast<T>(0.7978845608028654);  // √(2/π)
  return T(0.5) * x * (T(1) + tanh_of(c * (x + T(0.044715) * x * x * x)));
}
// d gelu / dx = (1 + tanh u)/2 + x/2 · (1 − tanh² u) · √(2/π) · (1 + 3·0.044715 x²)
template <typename T>
__device__ T gelu_derivative(T x) {
  constexpr T c = static_cast<T>(0.7978845608028654);
  const T t = tanh_of(c * (x + T(0.044715) * x * x * x));
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * c * (T(1) + T(3 * 0.044715) * x * x);
}

// σ(x) without overflow: for x < 0, e^x / (1 + e^x) avoids e^(-x) = inf. NaN takes the second
// branch and stays NaN.
template <typename T>
__device__ T sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + exp_of(-x));
  const T e = exp_of(x);
  return e / (T(1) + e);
}

// y = f(v) for one element; a and b are the op's parameters (UnaryParams in T).
template <typename T>
__device__ T unary_value(UnaryOp op, T v, T a, T b) {
  switch (op) {
    case UnaryOp::neg: return -v;
    case UnaryOp::exp: return exp_of(v);
    case UnaryOp::log: return log_of(v);
    case UnaryOp::tanh: return tanh_of(v);
    case UnaryOp::relu: return v < T(0) ? T(0) : v;  // keeps NaN as NaN
    case UnaryOp::sqrt: return sqrt_of(v);
    case UnaryOp::rsqrt: return T(1) / sqrt_of(v);  // not rsqrt(): that one is approximate
    case UnaryOp::sigmoid: return sigmoid(v);
    case UnaryOp::gelu: return gelu(v);
    case UnaryOp::square: return v * v;
    case UnaryOp::pow: return pow_of(v, a);
    case UnaryOp::clamp: return v < a ? a : (v > b ? b : v);  // NaN passes through
    case UnaryOp::add_scalar: return v + a;
    case UnaryOp::mul_scalar: return a * v;
  }
  return v;  // not reached: every op is a case above
}

// y[i] = f(x[i]), x and y [n] (y may be x).
template <typename T>
__global__ void unary_kernel(UnaryOp op, T a, T b, const T* x, T* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_step()) y[i] = unary_value(op, x[i], a, b);
}

// dx[i] (+)= dy[i] · f'(element i), all [n]. f' reads x or y = f(x) or neither; the pointer it
// does not read may be nullptr, so each case touches only the one it needs (as on the CPU).
template <typename T>
__global__ void unary_backward_kernel(UnaryOp op, T a, T b, const T* x, const T* y, const T* dy,
                                      T* dx, int64_t n, bool accumulate) {
  for (int64_t i = first_index(); i < n; i += index_step()) {
    const T g = dy[i];
    T grad = T(0);
    switch (op) {
      case UnaryOp::neg: grad = -g; break;
      case UnaryOp::exp: grad = g * y[i]; break;                                   // y
      case UnaryOp::log: grad = g / x[i]; break;                                   // 1/x
      case UnaryOp::tanh: grad = g * (T(1) - y[i] * y[i]); break;                  // 1 − y²
      case UnaryOp::relu: grad = x[i] > T(0) ? g : T(0); break;                    // [x > 0]
      case UnaryOp::sqrt: grad = g / (T(2) * y[i]); break;                         // 1/(2y)
      case UnaryOp::rsqrt: grad = T(-0.5) * g * y[i] * y[i] * y[i]; break;         // −y³/2
      case UnaryOp::sigmoid: grad = g * y[i] * (T(1) - y[i]); break;               // y(1 − y)
      case UnaryOp::gelu: grad = g * gelu_derivative(x[i]); break;
      case UnaryOp::square: grad = T(2) * x[i] * g; break;                         // 2x
      case UnaryOp::pow:  // a·x^(a−1); exactly 0 for a = 0 (no 0·inf at x = 0)
        grad = a == T(0) ? T(0) : g * a * pow_of(x[i], a - T(1));
        break;
      case UnaryOp::clamp:  // 1 inside [low, high] (inclusive), 0 outside
        grad = (x[i] >= a && x[i] <= b) ? g : T(0);
        break;
      case UnaryOp::add_scalar: grad = g; break;
      case UnaryOp::mul_scalar: grad = a * g; break;
    }
    dx[i] = accumulate ? dx[i] + grad : grad;
  }
}

template <typename T>
__device__ T binary_value(BinaryOp op, T u, T v) {
  switch (op) {
    case BinaryOp::add: return u + v;
    case BinaryOp::sub: return u - v;
    case BinaryOp::mul: return u * v;
    case BinaryOp::div: return u / v;
  }
  return u;  // not reached
}

// out[i] = a[·] (op) b[·], out [n]. When every shape equals out's (`flat`), element i of each
// input is element i; otherwise BroadcastOffsets maps i to the input's element.
template <typename T>
__global__ void binary_kernel(BinaryOp op, const T* a, BroadcastOffsets a_at, const T* b,
                              BroadcastOffsets b_at, T* out, int64_t n, bool flat) {
  for (int64_t i = first_index(); i < n; i += index_step()) {
    const T u = flat ? a[i] : a[a_at.offset(i)];
    const T v = flat ? b[i] : b[b_at.offset(i)];
    out[i] = binary_value(op, u, v);
  }
}

// out[i] = mask[·] != 0 ? a[·] : b[·] (a NaN mask counts as nonzero, as on the CPU).
template <typename T>
__global__ void where_kernel(const T* mask, BroadcastOffsets mask_at, const T* a,
                             BroadcastOffsets a_at, const T* b, BroadcastOffsets b_at, T* out,
                             int64_t n, bool flat) {
  for (int64_t i = first_index(); i < n; i += index_step()) {
    const T m = flat ? mask[i] : mask[mask_at.offset(i)];
    const T u = flat ? a[i] : a[a_at.offset(i)];
    const T v = flat ? b[i] : b[b_at.offset(i)];
    out[i] = m != T(0) ? u : v;
  }
}

// out[i] = x[·] broadcast to out's shape.
template <typename T>
__global__ void broadcast_kernel(const T* x, BroadcastOffsets x_at, T* out, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_step()) out[i] = x[x_at.offset(i)];
}

// out[i] = alpha · x[i] (out may be x: each thread reads its element before writing it).
template <typename T>
__global__ void scale_kernel(const T* x, T alpha, T* out, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_step()) out[i] = alpha * x[i];
}

// y[i] += alpha · x[i]; alpha == 1 is a plain add (as on the CPU: no multiply to round).
template <typename T>
__global__ void axpy_kernel(T alpha, bool alpha_is_one, const T* x, T* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_step()) {
    y[i] = alpha_is_one ? y[i] + x[i] : y[i] + alpha * x[i];
  }
}

}  // namespace

void CudaBackend::unary(UnaryOp op, UnaryParams p, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    unary_kernel<T><<<grid_for(n), kThreads>>>(op, static_cast<T>(p.a), static_cast<T>(p.b),
                                               x.data<T>(), y.data<T>(), n);
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::unary_backward(UnaryOp op, UnaryParams p, const Tensor* x, const Tensor* y,
                                 const Tensor& dy, Tensor& dx, bool accumulate) {
  const int64_t n = dy.numel();
  if (n == 0) return;
  dispatch(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xs = x ? x->data<T>() : nullptr;
    const T* ys = y ? y->data<T>() : nullptr;
    unary_backward_kernel<T><<<grid_for(n), kThreads>>>(op, static_cast<T>(p.a),
                                                        static_cast<T>(p.b), xs, ys,
                                                        dy.data<T>(), dx.data<T>(), n, accumulate);
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const bool flat = a.shape() == out.shape() && b.shape() == out.shape();
  const BroadcastOffsets a_at = cuda::broadcast_offsets(a.shape(), out.shape());
  const BroadcastOffsets b_at = cuda::broadcast_offsets(b.shape(), out.shape());
  dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    binary_kernel<T><<<grid_for(n), kThreads>>>(op, a.data<T>(), a_at, b.data<T>(), b_at,
                                                out.data<T>(), n, flat);
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::where(const Tensor& mask, const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const bool flat =
      mask.shape() == out.shape() && a.shape() == out.shape() && b.shape() == out.shape();
  const BroadcastOffsets mask_at = cuda::broadcast_offsets(mask.shape(), out.shape());
  const BroadcastOffsets a_at = cuda::broadcast_offsets(a.shape(), out.shape());
  const BroadcastOffsets b_at = cuda::broadcast_offsets(b.shape(), out.shape());
  dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    where_kernel<T><<<grid_for(n), kThreads>>>(mask.data<T>(), mask_at, a.data<T>(), a_at,
                                               b.data<T>(), b_at, out.data<T>(), n, flat);
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::broadcast_to(const Tensor& x, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (x.shape() == out.shape()) {  // nothing to broadcast: a plain copy
      if (x.raw_data() != out.raw_data()) {
        QKGRAD_CUDA_CHECK(cudaMemcpy(out.data<T>(), x.data<T>(), out.nbytes(),
                                     cudaMemcpyDeviceToDevice));
      }
      return;
    }
    const BroadcastOffsets x_at = cuda::broadcast_offsets(x.shape(), out.shape());
    broadcast_kernel<T><<<grid_for(n), kThreads>>>(x.data<T>(), x_at, out.data<T>(), n);
    QKGRAD_CUDA_LAUNCHED();
  });
}

void CudaBackend::scale(const Tensor& x, double alpha, Tensor& out) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<T><<<grid_for(n), kThreads>>>(x.data<T>(), static_cast<T>(alpha), out.data<T>(),
                                               n);
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::axpy(double alpha, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    axpy_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T>(alpha), alpha == 1.0, x.data<T>(),
                                              y.data<T>(), n);
  });
  QKGRAD_CUDA_LAUNCHED();
}

}  // namespace qkgrad
