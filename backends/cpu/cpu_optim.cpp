// Optimizer updates, fused into one pass over each parameter.
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_common.h"

namespace qkgrad {

void CpuBackend::sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, const SgdStep& s) {
  cpu::dispatch(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    const T lr_t = static_cast<T>(s.lr), mu = static_cast<T>(s.momentum), wd = static_cast<T>(s.weight_decay);
    const T c = static_cast<T>(s.grad_scale);
    const int64_t n = param.numel();
    if (s.momentum == 0.0) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
      for (int64_t i = 0; i < n; ++i) p[i] -= lr_t * (c * g[i] + wd * p[i]);
      return;
    }
    T* v = velocity.data<T>();
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      v[i] = mu * v[i] + c * g[i] + wd * p[i];  // v = mu v + (c g + wd p)
      p[i] -= lr_t * v[i];                      // p = p - lr v
    }
  });
}

void CpuBackend::adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamStep& s) {
  cpu::dispatch(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* m1 = m.data<T>();
    T* m2 = v.data<T>();
    const T b1 = static_cast<T>(s.beta1), b2 = static_cast<T>(s.beta2), e = static_cast<T>(s.eps);
    const T wd = static_cast<T>(s.weight_decay), step = static_cast<T>(s.lr), c = static_cast<T>(s.grad_scale);
    const T inv_bias1 = static_cast<T>(1.0 / s.bias1), inv_sqrt_bias2 = static_cast<T>(1.0 / std::sqrt(s.bias2));
    const bool decoupled = s.decoupled;
    const int64_t n = param.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const T gi = decoupled ? c * g[i] : c * g[i] + wd * p[i];
      m1[i] = b1 * m1[i] + (T(1) - b1) * gi;
      m2[i] = b2 * m2[i] + (T(1) - b2) * gi * gi;
      const T update = (m1[i] * inv_bias1) / (std::sqrt(m2[i]) * inv_sqrt_bias2 + e);
      p[i] -= step * (update + (decoupled ? wd * p[i] : T(0)));
    }
  });
}

}  // namespace qkgrad
