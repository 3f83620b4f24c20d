// The fused label-smoothed cross-entropy: log_softmax, the smoothed target distribution and
// the per-row loss in one pass over the logits; the backward writes softmax − q directly.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_common.h"
#include "core/fast_math.h"
#include "core/row_functions.h"

namespace qkgrad {

void CpuBackend::cross_entropy(const Tensor& logits, const Tensor& targets, double smoothing,
                               int64_t ignore_index, Tensor& row_loss, Tensor& lse) {
  cpu::dispatch(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t v = logits.size(-1), rows = v == 0 ? 0 : logits.numel() / v;
    const T* z = logits.data<T>();
    const int64_t* t = targets.data<int64_t>();
    T* loss = row_loss.data<T>();
    T* l = lse.data<T>();
    const T eps = static_cast<T>(smoothing), on = T(1) - eps, off = eps / static_cast<T>(v);
#pragma omp parallel for schedule(static) if (rows * v >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      if (t[r] == ignore_index) {  // a padding row: no loss, no gradient, so no pass over V
        loss[r] = l[r] = T(0);
        continue;
      }
      const T* zr = z + r * v;
      T m = zr[0];
#pragma omp simd reduction(max : m)
      for (int64_t j = 1; j < v; ++j) m = std::max(m, zr[j]);
      T s = 0, total = 0;
#pragma omp simd reduction(+ : s, total)
      for (int64_t j = 0; j < v; ++j) {
        s += exp_fast(zr[j] - m);
        total += zr[j];
      }
      l[r] = m + std::log(s);
      // −Σ_c q_c (z_c − lse) = lse − (1 − ε) z_t − (ε/V) Σ_c z_c, since Σ q = 1.
      loss[r] = rows::smoothed_cross_entropy(l[r], zr[t[r]], total, on, off);
    }
  });
}

void CpuBackend::cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                                        double smoothing, int64_t ignore_index, const Tensor& dloss,
                                        Tensor& dlogits) {
  cpu::dispatch(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t v = logits.size(-1), rows = v == 0 ? 0 : logits.numel() / v;
    const T* z = logits.data<T>();
    const T* l = lse.data<T>();
    const int64_t* t = targets.data<int64_t>();
    const T scale = dloss.data<T>()[0];
    T* d = dlogits.data<T>();
    const T eps = static_cast<T>(smoothing), on = T(1) - eps, off = eps / static_cast<T>(v);
#pragma omp parallel for schedule(static) if (rows * v >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T* zr = z + r * v;
      T* dr = d + r * v;
      if (t[r] == ignore_index) {
        std::fill(dr, dr + v, T(0));
        continue;
      }
      const T lse = l[r];
      const int64_t target = t[r];
#pragma omp simd
      for (int64_t j = 0; j < v; ++j) {
        dr[j] = rows::smoothed_cross_entropy_grad(scale, exp_fast(zr[j] - lse), off, j == target, on);  // p − q
      }
    }
  });
}

}  // namespace qkgrad
