// Optimizer updates, fused into one pass over each parameter.
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

}  // namespace qkgrad
