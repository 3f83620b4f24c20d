// The CUDA reductions (the GPU side of backends/cpu/cpu_reduce.cpp): sums over one axis or
// over everything, max / logsumexp / norm over one axis, and the backward of max.
//
// x is viewed as [outer, n, inner] and reduced over n. Two ways to split the work:
// - inner == 1: each output is one contiguous row of n values, so one block takes a row and
//   its threads stride along it (coalesced); a fixed tree (block_sum) adds the threads' parts.
// - inner > 1: one thread per output column (o, i) loops over j in order. Neighbouring threads
//   read neighbouring i, so every step of the loop is one coalesced read, and the sum is added
//   in exactly the CPU's order.
// sum_all and sum_of_squares follow the CPU's chunked_sum: fixed chunks of 4096 elements are
// summed (one block per chunk) into a scratch tensor of float64 partials, which one block then
// adds in a fixed tree. No atomics anywhere: every result repeats bit for bit.
//
// NaN: the CPU's max is std::max(a, b) = a < b ? b : a folded from the first element, so a NaN
// is skipped unless it is the first element (then it wins). The kernels here compute exactly
// that: the maximum over the non-NaN elements, or x[0] when x[0] is NaN.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_common.cuh"
#include "core/backend.h"
#include "core/tensor.h"

namespace qkgrad {

namespace {

using cuda::dispatch;
using cuda::grid_for;
using cuda::kMaxBlocks;
using cuda::kThreads;
using cuda::threads_for_row;

using cuda::abs_of;
using cuda::block_reduce;
using cuda::cpu_max;
using cuda::exp_of;
using cuda::grid_for_rows;
using cuda::is_finite;
using cuda::is_nan;
using cuda::log_of;
using cuda::MaxSkipNan;
using cuda::row_max;
using cuda::sqrt_of;

// The smaller of a and b (for the first index attaining the maximum).
struct MinOf {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};

// ---- sum_axis ----

// inner == 1: out[r] = Σ_j x[r, j], x as [rows, n]. One block per row; accumulates in T.
template <typename T>
__global__ void sum_rows_kernel(const T* x, int64_t rows, int64_t n, T* out) {
  __shared__ T shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* src = x + r * n;
    T s = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += src[j];
    s = cuda::block_sum(s, shared);
    if (threadIdx.x == 0) out[r] = s;
  }
}

// inner > 1: out[o, i] = Σ_j x[o, j, i], x as [outer, n, inner]. One thread per output (o, i),
// adding j = 0, 1, ... in order in T (the CPU's order exactly).
template <typename T>
__global__ void sum_columns_kernel(const T* x, int64_t outer, int64_t n, int64_t inner, T* out) {
  const int64_t outputs = outer * inner;
  for (int64_t item = cuda::first_index(); item < outputs; item += cuda::index_step()) {
    const T* src = x + (item / inner) * n * inner + item % inner;
    T s = 0;
    for (int64_t j = 0; j < n; ++j) s += src[j * inner];
    out[item] = s;
  }
}

// ---- sum_all, sum_of_squares: chunked, then the chunk sums in double ----

constexpr int64_t kChunk = 4096;  // as chunked_sum in cpu_reduce.cpp
constexpr int kChunkThreads = 256;
constexpr int kPartialThreads = 1024;

// partial[c] = Σ term(x[i]) over chunk c (i in [c·kChunk, min(n, (c+1)·kChunk))), one block per
// chunk. term(v) = v accumulated in T (sum_all), or v² accumulated in double (squares), as the
// CPU does. x as [n], partial as [chunks] (float64).
template <typename T, bool kSquares>
__global__ void chunk_sums_kernel(const T* x, int64_t n, int64_t chunks, double* partial) {
  using Acc = std::conditional_t<kSquares, double, T>;
  __shared__ Acc shared[32];
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int64_t begin = c * kChunk, end = begin + kChunk < n ? begin + kChunk : n;
    Acc s = 0;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const Acc v = static_cast<Acc>(x[i]);
      s += kSquares ? v * v : v;
    }
    s = cuda::block_sum(s, shared);
    if (threadIdx.x == 0) partial[c] = static_cast<double>(s);
  }
}

// out[0] = Σ_c partial[c] in double (a fixed tree), converted to Out. One block; chunks may be
// 0 (then out[0] = 0).
template <typename Out>
__global__ void sum_partials_kernel(const double* partial, int64_t chunks, Out* out) {
  __shared__ double shared[32];
  double s = 0;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) s += partial[c];
  s = cuda::block_sum(s, shared);
  if (threadIdx.x == 0) out[0] = static_cast<Out>(s);
}

// The chunk partials of x ([max(1, chunks)] float64; only the first `chunks` are written).
template <typename T, bool kSquares>
Tensor chunk_partials(const Tensor& x, int64_t& chunks) {
  const int64_t n = x.numel();
  chunks = (n + kChunk - 1) / kChunk;
  Tensor partial = Tensor::empty({std::max<int64_t>(1, chunks)}, DType::f64, Device::cuda);
  if (chunks > 0) {
    chunk_sums_kernel<T, kSquares><<<grid_for_rows(chunks), kChunkThreads>>>(
        x.data<T>(), n, chunks, partial.data<double>());
    QKGRAD_CUDA_LAUNCHED();
  }
  return partial;
}

// ---- reduce_axis: max, logsumexp, norm ----

// inner == 1: out[r] = reduce_j x[r, j], x as [rows, n]. One block per row; the block finds
// the max (or the largest magnitude), then sums e^(x − m) (or (x / scale)²) in T.
template <typename T>
__global__ void reduce_rows_kernel(ReduceOp op, const T* x, int64_t rows, int64_t n, T* out) {
  __shared__ T shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* src = x + r * n;
    T result;
    if (n == 0) {  // the empty reductions: max and logsumexp of nothing are -inf, norm is 0
      result = op == ReduceOp::norm ? T(0) : static_cast<T>(-INFINITY);
    } else if (op == ReduceOp::max) {
      result = row_max(src, n, shared);
    } else if (op == ReduceOp::logsumexp) {
      // log Σ e^x = m + log Σ e^(x − m) with m = max x: no overflow, and one term is 1.
      const T m = row_max(src, n, shared);
      if (!is_finite(m)) {
        result = m;  // all -inf gives -inf; any +inf (or a leading NaN) propagates
      } else {
        T s = 0;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += exp_of(src[j] - m);
        s = cuda::block_sum(s, shared);
        result = m + log_of(s);
      }
    } else {  // norm: scaled by the largest magnitude so that x² cannot overflow or underflow
      // scale = the CPU's fold std::max(scale, |x|) from 0: the largest non-NaN |x|, or 0.
      T scale = 0;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        scale = MaxSkipNan{}(scale, abs_of(src[j]));
      }
      scale = block_reduce(scale, T(0), MaxSkipNan{}, shared);
      if (scale == T(0) || !is_finite(scale)) {
        result = scale;
      } else {
        T s = 0;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
          const T v = src[j] / scale;
          s += v * v;
        }
        s = cuda::block_sum(s, shared);
        result = scale * sqrt_of(s);
      }
    }
    if (threadIdx.x == 0) out[r] = result;
  }
}

// inner > 1: out[o, i] = reduce_j x[o, j, i], x as [outer, n, inner]. One thread per output
// (o, i) runs the CPU's loops over j unchanged.
template <typename T>
__global__ void reduce_columns_kernel(ReduceOp op, const T* x, int64_t outer, int64_t n,
                                      int64_t inner, T* out) {
  const int64_t outputs = outer * inner;
  for (int64_t item = cuda::first_index(); item < outputs; item += cuda::index_step()) {
    const T* src = x + (item / inner) * n * inner + item % inner;
    T result;
    if (n == 0) {
      result = op == ReduceOp::norm ? T(0) : static_cast<T>(-INFINITY);
    } else if (op == ReduceOp::max) {
      result = src[0];
      for (int64_t j = 1; j < n; ++j) result = cpu_max(result, src[j * inner]);
    } else if (op == ReduceOp::logsumexp) {
      T m = src[0];
      for (int64_t j = 1; j < n; ++j) m = cpu_max(m, src[j * inner]);
      if (!is_finite(m)) {
        result = m;
      } else {
        T s = 0;
        for (int64_t j = 0; j < n; ++j) s += exp_of(src[j * inner] - m);
        result = m + log_of(s);
      }
    } else {
      T scale = 0;
      for (int64_t j = 0; j < n; ++j) scale = cpu_max(scale, abs_of(src[j * inner]));
      if (scale == T(0) || !is_finite(scale)) {
        result = scale;
      } else {
        T s = 0;
        for (int64_t j = 0; j < n; ++j) {
          const T v = src[j * inner] / scale;
          s += v * v;
        }
        result = scale * sqrt_of(s);
      }
    }
    out[item] = result;
  }
}

// ---- max_axis_backward ----

// inner == 1: dx[r, j] = dy[r] at the first j where x[r, j] attains the row's max, 0 elsewhere;
// x and dx as [rows, n] (n >= 1), dy as [rows]. One block per row: the max, then the smallest
// j holding it (the CPU's `x[j] > x[best]` scan keeps the first one). A leading NaN is the
// max (the CPU's best stays 0); other NaNs never are.
template <typename T>
__global__ void max_backward_rows_kernel(const T* x, const T* dy, int64_t rows, int64_t n, T* dx) {
  __shared__ T shared[32];
  __shared__ int64_t shared_index[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* src = x + r * n;
    const T m = row_max(src, n, shared);
    int64_t first = n;  // n: not found (yet)
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      if (src[j] == m) {
        first = j;  // this thread's j only grow, so its first hit is its smallest
        break;
      }
    }
    first = block_reduce(first, n, MinOf{}, shared_index);
    // A leading NaN is the max itself (found nowhere by ==): then best is 0, as on the CPU.
    const int64_t best = is_nan(src[0]) || first == n ? 0 : first;
    const T g = dy[r];
    T* d = dx + r * n;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) d[j] = j == best ? g : T(0);
  }
}

// inner > 1: the same with x, dx as [outer, n, inner] and dy as [outer, inner]. One thread per
// column (o, i) runs the CPU's scan over j, then writes the column of dx (coalesced over i).
template <typename T>
__global__ void max_backward_columns_kernel(const T* x, const T* dy, int64_t outer, int64_t n,
                                            int64_t inner, T* dx) {
  const int64_t outputs = outer * inner;
  for (int64_t item = cuda::first_index(); item < outputs; item += cuda::index_step()) {
    const int64_t base = (item / inner) * n * inner + item % inner;
    int64_t best = 0;
    for (int64_t j = 1; j < n; ++j) {
      if (x[base + j * inner] > x[base + best * inner]) best = j;
    }
    const T g = dy[item];
    for (int64_t j = 0; j < n; ++j) dx[base + j * inner] = j == best ? g : T(0);
  }
}

}  // namespace

void CudaBackend::sum_axis(const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out) {
  const int64_t outputs = outer * inner;
  if (outputs == 0) return;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (inner == 1) {
      sum_rows_kernel<T><<<grid_for_rows(outer), threads_for_row(n)>>>(x.data<T>(), outer, n,
                                                                        out.data<T>());
    } else {
      sum_columns_kernel<T><<<grid_for(outputs), kThreads>>>(x.data<T>(), outer, n, inner,
                                                             out.data<T>());
    }
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::sum_all(const Tensor& x, Tensor& out) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    int64_t chunks = 0;
    const Tensor partial = chunk_partials<T, false>(x, chunks);
    sum_partials_kernel<T><<<1, kPartialThreads>>>(partial.data<double>(), chunks, out.data<T>());
    QKGRAD_CUDA_LAUNCHED();
  });
}

// out[0] = Σ_i sums[i] for i = 0, 1, … in order (one thread: the order of the CPU's loop).
__global__ void ordered_sum_kernel(const double* sums, int64_t n, double* out) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += sums[i];
  out[0] = total;
}

double CudaBackend::sum_of_squares(const std::vector<Tensor>& xs) {
  if (xs.empty()) return 0.0;
  const int64_t n = static_cast<int64_t>(xs.size());
  Tensor sums = Tensor::empty({n + 1}, DType::f64, Device::cuda);  // each tensor's, then the total
  double* sums_ptr = sums.data<double>();
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& x = xs[static_cast<std::size_t>(i)];
    dispatch(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      int64_t chunks = 0;
      const Tensor partial = chunk_partials<T, true>(x, chunks);  // no chunks: the sum is 0
      sum_partials_kernel<double><<<1, kPartialThreads>>>(partial.data<double>(), chunks,
                                                          sums_ptr + i);
      QKGRAD_CUDA_LAUNCHED();
    });
  }
  ordered_sum_kernel<<<1, 1>>>(sums_ptr, n, sums_ptr + n);
  QKGRAD_CUDA_LAUNCHED();
  double total = 0;
  QKGRAD_CUDA_CHECK(cudaMemcpy(&total, sums_ptr + n, sizeof total, cudaMemcpyDeviceToHost));
  return total;
}

void CudaBackend::reduce_axis(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                              Tensor& out) {
  const int64_t outputs = outer * inner;
  if (outputs == 0) return;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (inner == 1) {
      reduce_rows_kernel<T><<<grid_for_rows(outer), threads_for_row(n)>>>(op, x.data<T>(), outer,
                                                                           n, out.data<T>());
    } else {
      reduce_columns_kernel<T><<<grid_for(outputs), kThreads>>>(op, x.data<T>(), outer, n, inner,
                                                                out.data<T>());
    }
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::max_axis_backward(const Tensor& x, const Tensor& dy, int64_t outer, int64_t n,
                                    int64_t inner, Tensor& dx) {
  const int64_t outputs = outer * inner;
  if (outputs == 0 || n == 0) return;  // dx has no elements
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (inner == 1) {
      max_backward_rows_kernel<T><<<grid_for_rows(outer), threads_for_row(n)>>>(
          x.data<T>(), dy.data<T>(), outer, n, dx.data<T>());
    } else {
      max_backward_columns_kernel<T><<<grid_for(outputs), kThreads>>>(
          x.data<T>(), dy.data<T>(), outer, n, inner, dx.data<T>());
    }
  });
  QKGRAD_CUDA_LAUNCHED();
}

}  // namespace qkgrad
