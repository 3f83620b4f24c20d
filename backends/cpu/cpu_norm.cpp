// Row-wise normalisations over the last dimension: softmax / log_softmax, layer norm and l2
// normalisation, forward and backward. Rows are independent, so threads take whole rows; the
// one cross-row sum (layer norm's dgamma, dbeta) adds fixed blocks of rows in a fixed order.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_common.h"
#include "core/fast_math.h"
#include "core/row_functions.h"

namespace qkgrad {

using cpu::dispatch;

namespace {

// Unpacked into plain variables, not structured bindings: clang 14 cannot use those inside
// the OpenMP regions below.
struct Rows {
  int64_t rows, d;
};
Rows rows_of(const Tensor& x) {
  const int64_t d = x.rank() == 0 ? 1 : x.shape()[x.rank() - 1];
  return {d == 0 ? 0 : x.numel() / d, d};
}

}  // namespace

void CpuBackend::softmax(const Tensor& x, Tensor& y, bool log) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Rows dims = rows_of(x);
    const int64_t rows = dims.rows, d = dims.d;
    const T* in = x.data<T>();
    T* out = y.data<T>();
#pragma omp parallel for schedule(static) if (rows * d >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = in + r * d;
      T* yr = out + r * d;
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < d; ++j) m = std::max(m, xr[j]);
      if (m == -std::numeric_limits<T>::infinity()) {  // nothing to attend to: defined, not NaN
        for (int64_t j = 0; j < d; ++j) yr[j] = log ? m : T(0);
        continue;
      }
      // softmax(x) = e^(x − m) / Σ e^(x − m): the largest term is e⁰ = 1, so no overflow.
      T s = 0;
      if (log) {
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < d; ++j) s += exp_fast(xr[j] - m);
      } else {
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < d; ++j) {
          yr[j] = exp_fast(xr[j] - m);
          s += yr[j];
        }
      }
      if (log) {
        const T log_s = std::log(s);
        for (int64_t j = 0; j < d; ++j) yr[j] = xr[j] - m - log_s;
      } else {
        const T inv = T(1) / s;
        for (int64_t j = 0; j < d; ++j) yr[j] *= inv;
      }
    }
  });
}

void CpuBackend::softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx, bool log) {
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Rows dims = rows_of(y);
    const int64_t rows = dims.rows, d = dims.d;
    const T* ys = y.data<T>();
    const T* g = dy.data<T>();
    T* out = dx.data<T>();
#pragma omp parallel for schedule(static) if (rows * d >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T* yr = ys + r * d;
      const T* gr = g + r * d;
      T* dr = out + r * d;
      if (log) {  // dx = dy − softmax · Σ dy, with softmax = e^y (0 for a row of -inf)
        T s = 0;
        for (int64_t j = 0; j < d; ++j) s += gr[j];
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) dr[j] = rows::log_softmax_grad(exp_fast(yr[j]), gr[j], s);
      } else {  // dx = y ⊙ (dy − Σ dy ⊙ y)
        T s = 0;
        for (int64_t j = 0; j < d; ++j) s += gr[j] * yr[j];
        for (int64_t j = 0; j < d; ++j) dr[j] = rows::softmax_grad(yr[j], gr[j], s);
      }
    }
  });
}

namespace {
// The norms' parameter gradients: sum_a[j] = Σ_r a[r, j] and sum_b[j] = Σ_r b[r, j] over the rows
// of [rows, d], where add_row(r, a, b) adds row r's terms into the partial rows a and b (b may go
// unused; either output may be null). Fixed blocks of 32 rows are summed in parallel, then the
// block sums in block order: the same result for any thread count.
template <typename T, typename AddRow>
void sum_rows_in_blocks(int64_t rows, int64_t d, T* sum_a, T* sum_b, AddRow add_row) {
  constexpr int64_t kBlock = 32;
  const int64_t blocks = (rows + kBlock - 1) / kBlock;
  std::vector<T> part_a(blocks * d, T(0)), part_b(part_a.size(), T(0));
#pragma omp parallel for schedule(static) if (rows * d >= kParallelGrain)
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t r = b * kBlock; r < std::min(rows, (b + 1) * kBlock); ++r) add_row(r, part_a.data() + b * d, part_b.data() + b * d);
  }
  for (int64_t j = 0; j < d; ++j) {
    T sa = 0, sb = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      sa += part_a[b * d + j];
      sb += part_b[b * d + j];
    }
    if (sum_a) sum_a[j] = sa;
    if (sum_b) sum_b[j] = sb;
  }
}
}  // namespace

void CpuBackend::layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                            Tensor& y, Tensor& mean, Tensor& rstd) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Rows dims = rows_of(x);
    const int64_t rows = dims.rows, d = dims.d;
    const T* in = x.data<T>();
    const T* ga = gamma.data<T>();
    const T* be = beta.data<T>();
    T* out = y.data<T>();
    T* mu = mean.data<T>();
    T* rs = rstd.data<T>();
#pragma omp parallel for schedule(static) if (rows * d >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = in + r * d;
      // Two passes (mean, then the mean of squared deviations): no cancellation in var.
      // The sums are vectorised (omp simd): a fixed order of partial sums, so still deterministic.
      T s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < d; ++j) s += xr[j];
      const T m = s / static_cast<T>(d);
      T v = 0;
#pragma omp simd reduction(+ : v)
      for (int64_t j = 0; j < d; ++j) v += (xr[j] - m) * (xr[j] - m);
      const T inv = T(1) / std::sqrt(v / static_cast<T>(d) + static_cast<T>(eps));
      mu[r] = m;
      rs[r] = inv;
      T* yr = out + r * d;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) yr[j] = rows::layer_norm_value(xr[j], m, inv, ga[j], be[j]);
    }
  });
}

void CpuBackend::layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& dy, Tensor* dx,
                                     Tensor* dgamma, Tensor* dbeta) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Rows dims = rows_of(x);
    const int64_t rows = dims.rows, d = dims.d;
    const T* in = x.data<T>();
    const T* ga = gamma.data<T>();
    const T* mu = mean.data<T>();
    const T* rs = rstd.data<T>();
    const T* g = dy.data<T>();
    if (dx) {
      // With x̂ = (x − μ)·rstd and h = dy ⊙ γ:  dx = rstd · (h − mean(h) − x̂ · mean(h ⊙ x̂))
      T* out = dx->data<T>();
#pragma omp parallel for schedule(static) if (rows * d >= kParallelGrain)
      for (int64_t r = 0; r < rows; ++r) {
        const T* xr = in + r * d;
        const T* gr = g + r * d;
        const T m = mu[r], rstd_r = rs[r];
        T mean_h = 0, mean_hx = 0;
#pragma omp simd reduction(+ : mean_h, mean_hx)
        for (int64_t j = 0; j < d; ++j) {
          const T h = gr[j] * ga[j];
          mean_h += h;
          mean_hx += h * (xr[j] - m) * rstd_r;
        }
        mean_h /= static_cast<T>(d);
        mean_hx /= static_cast<T>(d);
        T* dr = out + r * d;
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) dr[j] = rows::layer_norm_grad(xr[j], gr[j], ga[j], m, rstd_r, mean_h, mean_hx);
      }
    }
    if (dgamma || dbeta) {  // dγ = Σ_rows dy ⊙ x̂, dβ = Σ_rows dy
      sum_rows_in_blocks<T>(rows, d, dgamma ? dgamma->data<T>() : nullptr, dbeta ? dbeta->data<T>() : nullptr,
                            [&](int64_t r, T* pg, T* pb) {
                              const T* xr = in + r * d;
                              const T* gr = g + r * d;
                              const T m = mu[r], rstd_r = rs[r];
#pragma omp simd
                              for (int64_t j = 0; j < d; ++j) {
                                pg[j] += gr[j] * (xr[j] - m) * rstd_r;
                                pb[j] += gr[j];
                              }
                            });
    }
  });
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& gamma, double eps, Tensor& y, Tensor& rstd) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Rows dims = rows_of(x);
    const int64_t rows = dims.rows, d = dims.d;
    const T* in = x.data<T>();
    const T* ga = gamma.data<T>();
    T* out = y.data<T>();
    T* rs = rstd.data<T>();
#pragma omp parallel for schedule(static) if (rows * d >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = in + r * d;
      T s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < d; ++j) s += xr[j] * xr[j];
      const T inv = T(1) / std::sqrt(s / static_cast<T>(d) + static_cast<T>(eps));
      rs[r] = inv;
      T* yr = out + r * d;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) yr[j] = rows::rms_norm_value(xr[j], inv, ga[j]);
    }
  });
}

void CpuBackend::rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& rstd, const Tensor& dy,
                                   Tensor* dx, Tensor* dgamma) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Rows dims = rows_of(x);
    const int64_t rows = dims.rows, d = dims.d;
    const T* in = x.data<T>();
    const T* ga = gamma.data<T>();
    const T* rs = rstd.data<T>();
    const T* g = dy.data<T>();
    if (dx) {
      // With x̂ = x·rstd and h = dy ⊙ γ:  dx = rstd · (h − x̂ · mean(h ⊙ x̂))
      T* out = dx->data<T>();
#pragma omp parallel for schedule(static) if (rows * d >= kParallelGrain)
      for (int64_t r = 0; r < rows; ++r) {
        const T* xr = in + r * d;
        const T* gr = g + r * d;
        const T rstd_r = rs[r];
        T mean_hx = 0;
#pragma omp simd reduction(+ : mean_hx)
        for (int64_t j = 0; j < d; ++j) mean_hx += gr[j] * ga[j] * xr[j] * rstd_r;
        mean_hx /= static_cast<T>(d);
        T* dr = out + r * d;
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) dr[j] = rows::rms_norm_grad(xr[j], gr[j], ga[j], rstd_r, mean_hx);
      }
    }
    if (dgamma) {  // dγ = Σ_rows dy ⊙ x̂
      sum_rows_in_blocks<T>(rows, d, dgamma->data<T>(), nullptr, [&](int64_t r, T* pg, T*) {
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) pg[j] += g[r * d + j] * in[r * d + j] * rs[r];
      });
    }
  });
}

void CpuBackend::l2_normalize(const Tensor& x, double eps, Tensor& y, Tensor& norm) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Rows dims = rows_of(x);
    const int64_t rows = dims.rows, d = dims.d;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    T* nr = norm.data<T>();
#pragma omp parallel for schedule(static) if (rows * d >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = in + r * d;
      T s = 0;
      for (int64_t j = 0; j < d; ++j) s += xr[j] * xr[j];
      const T n = std::sqrt(s);
      nr[r] = n;
      const T inv = T(1) / std::max(n, static_cast<T>(eps));
      T* yr = out + r * d;
      for (int64_t j = 0; j < d; ++j) yr[j] = xr[j] * inv;
    }
  });
}

void CpuBackend::l2_normalize_backward(const Tensor& y, const Tensor& norm, double eps,
                                       const Tensor& dy, Tensor& dx) {
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Rows dims = rows_of(y);
    const int64_t rows = dims.rows, d = dims.d;
    const T* ys = y.data<T>();
    const T* nr = norm.data<T>();
    const T* g = dy.data<T>();
    T* out = dx.data<T>();
    const T e = static_cast<T>(eps);
#pragma omp parallel for schedule(static) if (rows * d >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T* yr = ys + r * d;
      const T* gr = g + r * d;
      T* dr = out + r * d;
      const T inv = T(1) / std::max(nr[r], e);
      // Above eps, y = x/‖x‖ lies on the unit sphere and only the tangential part of dy
      // survives: dx = (dy − y (y·dy)) / ‖x‖. At or below eps, y = x/eps is linear in x.
      T dot = 0;
      if (nr[r] > e) {
        for (int64_t j = 0; j < d; ++j) dot += yr[j] * gr[j];
      }
      for (int64_t j = 0; j < d; ++j) dr[j] = rows::l2_normalize_grad(yr[j], gr[j], inv, dot);
    }
  });
}

}  // namespace qkgrad
