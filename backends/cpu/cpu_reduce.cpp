// Sums. Every reduction here adds in an order fixed by the shapes alone (never by the number of
// threads or by timing), so results are bit-for-bit reproducible.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_common.h"

namespace qkgrad {

using cpu::dispatch;

namespace {

// Σ term(i) for i < n, deterministic for any thread count: fixed chunks of 4096 terms are
// summed in parallel (vectorised, accumulating in Acc), then the chunk sums are added in chunk
// order in double. `term` must capture by value (see map_index in cpu_loops.h).
template <typename Acc, typename F>
double chunked_sum(int64_t n, F term) {
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(chunks);
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
    const F local = term;
    Acc s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = begin; i < end; ++i) s += local(i);
    partial[c] = static_cast<double>(s);
  }
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace

void CpuBackend::sum_axis(const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    const int64_t work = outer * n * inner;
    if (inner == 1) {
      // Each output is the sum of one contiguous row of n values.
#pragma omp parallel for schedule(static) if (work >= kParallelGrain)
      for (int64_t r = 0; r < outer; ++r) {
        const T* row = in + r * n;
        T s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < n; ++j) s += row[j];
        o[r] = s;
      }
      return;
    }
    // Each output row of `inner` values accumulates n input rows. Work is split into slices of
    // the inner dimension so that a single large row (e.g. a bias gradient) still uses all cores.
    constexpr int64_t kSlice = 512;
    const int64_t slices = (inner + kSlice - 1) / kSlice;
#pragma omp parallel for schedule(static) if (work >= kParallelGrain)
    for (int64_t item = 0; item < outer * slices; ++item) {
      const int64_t r = item / slices;
      const int64_t begin = (item % slices) * kSlice;
      const int64_t end = std::min(inner, begin + kSlice);
      T* dst = o + r * inner;
      for (int64_t i = begin; i < end; ++i) dst[i] = 0;
      for (int64_t j = 0; j < n; ++j) {
        const T* src = in + (r * n + j) * inner;
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) dst[i] += src[i];
      }
    }
  });
}

void CpuBackend::sum_all(const Tensor& x, Tensor& out) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    out.data<T>()[0] = static_cast<T>(chunked_sum<T>(x.numel(), [in](int64_t i) { return in[i]; }));
  });
}

double CpuBackend::sum_of_squares(const std::vector<Tensor>& xs) {
  double total = 0;
  for (const Tensor& x : xs) {
    dispatch(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* in = x.data<T>();
      total += chunked_sum<double>(x.numel(), [in](int64_t i) {
        return static_cast<double>(in[i]) * static_cast<double>(in[i]);
      });
    });
  }
  return total;
}

void CpuBackend::reduce_axis(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                             Tensor& out) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    // One output per (row r, column i); its n inputs are in[r·n·inner + j·inner + i].
#pragma omp parallel for schedule(static) if (outer * n * inner >= kParallelGrain)
    for (int64_t item = 0; item < outer * inner; ++item) {
      const T* src = in + (item / inner) * n * inner + item % inner;
      T result;
      if (n == 0) {  // the empty reductions: max and logsumexp of nothing are -inf, norm is 0
        result = op == ReduceOp::norm ? T(0) : -std::numeric_limits<T>::infinity();
      } else if (op == ReduceOp::max) {
        result = src[0];
        for (int64_t j = 1; j < n; ++j) result = std::max(result, src[j * inner]);
      } else if (op == ReduceOp::logsumexp) {
        // log Σ e^x = m + log Σ e^(x − m) with m = max x: no overflow, and at least one term is 1.
        T m = src[0];
        for (int64_t j = 1; j < n; ++j) m = std::max(m, src[j * inner]);
        if (!std::isfinite(m)) {
          result = m;  // all -inf gives -inf; any +inf (or NaN) propagates
        } else {
          T s = 0;
          for (int64_t j = 0; j < n; ++j) s += std::exp(src[j * inner] - m);
          result = m + std::log(s);
        }
      } else {  // norm: scaled by the largest magnitude so that x² cannot overflow or underflow
        T scale = 0;
        for (int64_t j = 0; j < n; ++j) scale = std::max(scale, std::fabs(src[j * inner]));
        if (scale == T(0) || !std::isfinite(scale)) {
          result = scale;
        } else {
          T s = 0;
          for (int64_t j = 0; j < n; ++j) {
            const T v = src[j * inner] / scale;
            s += v * v;
          }
          result = scale * std::sqrt(s);
        }
      }
      o[item] = result;
    }
  });
}

void CpuBackend::max_axis_backward(const Tensor& x, const Tensor& dy, int64_t outer, int64_t n,
                                   int64_t inner, Tensor& dx) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    const T* g = dy.data<T>();
    T* d = dx.data<T>();
#pragma omp parallel for schedule(static) if (outer * n * inner >= kParallelGrain)
    for (int64_t item = 0; item < outer * inner; ++item) {
      const int64_t base = (item / inner) * n * inner + item % inner;
      int64_t best = 0;
      for (int64_t j = 1; j < n; ++j) {
        if (in[base + j * inner] > in[base + best * inner]) best = j;
      }
      for (int64_t j = 0; j < n; ++j) d[base + j * inner] = j == best ? g[item] : T(0);
    }
  });
}

}  // namespace qkgrad
