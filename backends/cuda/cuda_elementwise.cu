// Elementwise CUDA kernels: unary maps and their derivatives, broadcasting binary ops and
// select (where), broadcast_to, scale and axpy. The unary maps run the functors of
// core/unary_functions.h, the very code the CPU runs; the others mirror
// backends/cpu/cpu_elementwise.cpp formula for formula (same operations in the same order, same
// NaN behaviour). So the two agree to rounding: the GPU's exp/log/tanh/pow differ from glibc's
// by an ulp or so, and nvcc may fuse a multiply and an add into one fma.
//
// Every kernel here is a grid-stride loop with one thread per output element (cuda_common.cuh:
// grid_for, first_index, index_step); consecutive threads touch consecutive elements, so
// reads and writes are coalesced. Nothing is launched for an empty tensor.
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_common.cuh"
#include "core/backend.h"
#include "core/row_functions.h"
#include "core/tensor.h"

namespace qkgrad {

namespace {

using cuda::BroadcastOffsets;
using cuda::dispatch;
using cuda::first_index;
using cuda::grid_for;
using cuda::index_step;
using cuda::kThreads;


// y[i] = F::f(x[i]), x and y [n] (y may be x). F is the op's functor in
// core/unary_functions.h, the same f the CPU kernel runs (one kernel per functor).
template <typename F, typename T>
__global__ void unary_kernel(T a, T b, const T* x, T* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_step()) y[i] = F::f(x[i], a, b);
}

// dx[i] (+)= F::grad(dy[i], ...) = dy[i] · f'(element i), all [n]. f' reads x or y = f(x) or
// neither; the pointer it does not read may be nullptr and is not touched (as on the CPU).
template <typename F, typename T>
__global__ void unary_backward_kernel(T a, T b, const T* x, const T* y, const T* dy, T* dx, int64_t n,
                                      bool accumulate) {
  for (int64_t i = first_index(); i < n; i += index_step()) {
    const T xi = F::reads == Reads::x ? x[i] : T(0), yi = F::reads == Reads::y ? y[i] : T(0);
    const T grad = F::grad(dy[i], xi, yi, a, b);
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

// RoPE's rotation: one thread per pair p = ((b·T + t)·H + h)·m + i of x [B, T, H·2m], the pair
// (i, i + m) of head h at time t, turned by the angle of cos[t, i], sin[t, i] ([T, m]).
template <typename T>
__global__ void rope_kernel(const T* x, const T* cos, const T* sin, T* y, int64_t pairs, int64_t time,
                            int64_t heads, int64_t m) {
  for (int64_t p = first_index(); p < pairs; p += index_step()) {
    const int64_t i = p % m, row_head = p / m;  // row_head = (b·T + t)·H + h
    const int64_t t = (row_head / heads) % time;
    const int64_t at = row_head * 2 * m + i;
    const T c = cos[t * m + i], s = sin[t * m + i], x1 = x[at], x2 = x[at + m];
    y[at] = rows::rope_first(x1, x2, c, s);
    y[at + m] = rows::rope_second(x1, x2, c, s);
  }
}

}  // namespace

void CudaBackend::unary(UnaryOp op, UnaryParams p, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_unary(op, [&](auto fn) {
      unary_kernel<decltype(fn), T><<<grid_for(n), kThreads>>>(static_cast<T>(p.a), static_cast<T>(p.b), x.data<T>(),
                                                               y.data<T>(), n);
    });
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
    visit_unary(op, [&](auto fn) {
      unary_backward_kernel<decltype(fn), T><<<grid_for(n), kThreads>>>(static_cast<T>(p.a), static_cast<T>(p.b), xs,
                                                                        ys, dy.data<T>(), dx.data<T>(), n, accumulate);
    });
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

void CudaBackend::rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t heads, Tensor& y) {
  const int64_t pairs = x.numel() / 2;
  if (pairs == 0) return;
  const int64_t time = x.size(1), m = x.size(2) / heads / 2;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    rope_kernel<T><<<grid_for(pairs), kThreads>>>(x.data<T>(), cos.data<T>(), sin.data<T>(), y.data<T>(), pairs, time,
                                                  heads, m);
  });
  QKGRAD_CUDA_LAUNCHED();
}

}  // namespace qkgrad
