// Optimizer updates on the GPU, fused into one pass over each parameter: SGD (with momentum)
// and Adam/AdamW. They mirror backends/cpu/cpu_optim.cpp operation for operation, in the
// parameter's precision, with the same host-computed constants, so the two agree to rounding
// (nvcc may fuse a multiply and an add into one fma where the CPU rounds twice).
//
// Work split: one thread per parameter element, in a grid-stride loop; every element's update
// is independent, and consecutive threads touch consecutive elements (coalesced).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_common.cuh"
#include "core/backend.h"
#include "core/tensor.h"

namespace qkgrad {

namespace {

using cuda::dispatch;
using cuda::first_index;
using cuda::grid_for;
using cuda::index_step;
using cuda::kThreads;

using cuda::sqrt_of;

// SGD without momentum, all [n]:  p = p − lr · (c · g + wd · p)   (c: the clipping factor)
template <typename T>
__global__ void sgd_kernel(T* param, const T* grad, int64_t n, T lr, T weight_decay, T c) {
  for (int64_t i = first_index(); i < n; i += index_step()) {
    const T p = param[i];
    param[i] = p - lr * (c * grad[i] + weight_decay * p);
  }
}

// SGD with momentum, all [n]:  v = mu · v + c · g + wd · p;  p = p − lr · v
template <typename T>
__global__ void sgd_momentum_kernel(T* param, const T* grad, T* velocity, int64_t n, T lr,
                                    T momentum, T weight_decay, T c) {
  for (int64_t i = first_index(); i < n; i += index_step()) {
    const T p = param[i];
    const T v = momentum * velocity[i] + c * grad[i] + weight_decay * p;
    velocity[i] = v;
    param[i] = p - lr * v;
  }
}

// Adam, all [n]. g = c · grad (+ wd · p unless decoupled), c the clipping factor;
//   m = β₁ m + (1 − β₁) g;  v = β₂ v + (1 − β₂) g²
//   p = p − lr · ((m / bias1) / (√v / √bias2 + eps) + (decoupled ? wd · p : 0))
// with 1/bias1 and 1/√bias2 precomputed on the host (in double, then rounded to T).
template <typename T>
__global__ void adam_kernel(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, int64_t n, T lr,
                            T beta1, T beta2, T eps, T weight_decay, bool decoupled, T inv_bias1,
                            T inv_sqrt_bias2, T c) {
  for (int64_t i = first_index(); i < n; i += index_step()) {
    const T p = param[i];
    const T g = decoupled ? c * grad[i] : c * grad[i] + weight_decay * p;
    const T m = beta1 * exp_avg[i] + (T(1) - beta1) * g;
    const T v = beta2 * exp_avg_sq[i] + (T(1) - beta2) * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const T update = (m * inv_bias1) / (sqrt_of(v) * inv_sqrt_bias2 + eps);
    param[i] = p - lr * (update + (decoupled ? weight_decay * p : T(0)));
  }
}

}  // namespace

void CudaBackend::sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, const SgdStep& s) {
  const int64_t n = param.numel();
  if (n == 0) return;
  dispatch(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T lr_t = static_cast<T>(s.lr), wd = static_cast<T>(s.weight_decay), c = static_cast<T>(s.grad_scale);
    if (s.momentum == 0.0) {  // velocity is unused (the caller may pass param itself)
      sgd_kernel<T><<<grid_for(n), kThreads>>>(param.data<T>(), grad.data<T>(), n, lr_t, wd, c);
    } else {
      sgd_momentum_kernel<T><<<grid_for(n), kThreads>>>(param.data<T>(), grad.data<T>(),
                                                        velocity.data<T>(), n, lr_t,
                                                        static_cast<T>(s.momentum), wd, c);
    }
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamStep& s) {
  const int64_t n = param.numel();
  if (n == 0) return;
  dispatch(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T inv_bias1 = static_cast<T>(1.0 / s.bias1);
    const T inv_sqrt_bias2 = static_cast<T>(1.0 / std::sqrt(s.bias2));
    adam_kernel<T><<<grid_for(n), kThreads>>>(
        param.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), n, static_cast<T>(s.lr),
        static_cast<T>(s.beta1), static_cast<T>(s.beta2), static_cast<T>(s.eps),
        static_cast<T>(s.weight_decay), s.decoupled, inv_bias1, inv_sqrt_bias2,
        static_cast<T>(s.grad_scale));
  });
  QKGRAD_CUDA_LAUNCHED();
}

}  // namespace qkgrad
