// Optimizer updates, fused into one pass over each parameter.
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_common.h"

namespace qkgrad {

void CpuBackend::sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, double lr,
                            double momentum, double weight_decay) {
  cpu::dispatch(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    const T lr_t = static_cast<T>(lr), mu = static_cast<T>(momentum), wd = static_cast<T>(weight_decay);
    const int64_t n = param.numel();
    if (momentum == 0.0) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
      for (int64_t i = 0; i < n; ++i) p[i] -= lr_t * (g[i] + wd * p[i]);
      return;
    }
    T* v = velocity.data<T>();
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      v[i] = mu * v[i] + g[i] + wd * p[i];  // v = mu v + (g + wd p)
      p[i] -= lr_t * v[i];                  // p = p - lr v
    }
  });
}

void CpuBackend::adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, double lr,
                             double beta1, double beta2, double eps, double weight_decay,
                             bool decoupled, double bias1, double bias2) {
  cpu::dispatch(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* m1 = m.data<T>();
    T* m2 = v.data<T>();
    const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2), e = static_cast<T>(eps);
    const T wd = static_cast<T>(weight_decay), step = static_cast<T>(lr);
    const T inv_bias1 = static_cast<T>(1.0 / bias1), inv_sqrt_bias2 = static_cast<T>(1.0 / std::sqrt(bias2));
    const int64_t n = param.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const T gi = decoupled ? g[i] : g[i] + wd * p[i];
      m1[i] = b1 * m1[i] + (T(1) - b1) * gi;
      m2[i] = b2 * m2[i] + (T(1) - b2) * gi * gi;
      const T update = (m1[i] * inv_bias1) / (std::sqrt(m2[i]) * inv_sqrt_bias2 + e);
      p[i] -= step * (update + (decoupled ? wd * p[i] : T(0)));
    }
  });
}

}  // namespace qkgrad
