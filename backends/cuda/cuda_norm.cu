// Row-wise normalisations over the last dimension on the GPU (the CUDA side of
// backends/cpu/cpu_norm.cpp): softmax / log_softmax, layer norm and l2 normalisation, forward
// and backward.
//
// x is viewed as [rows, d]. Every row kernel gives one block to a row (threads_for_row(d)
// threads, looping over the rows when there are more than kMaxBlocks): the threads stride
// along the row (coalesced), and the row's max and sums come from fixed trees
// (block_max_skip_nan below, block_sum), so results repeat bit for bit. Each element is read
// and written by the same thread after the row's reductions are complete, so y may even be x.
// The one cross-row sum (layer norm's dgamma, dbeta) adds fixed blocks of 32 rows into a
// scratch tensor, then the blocks in order: the CPU's order exactly.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_common.cuh"
#include "core/row_functions.h"
#include "core/backend.h"
#include "core/tensor.h"

namespace qkgrad {

namespace {

using cuda::block_sum;
using cuda::dispatch;
using cuda::grid_for;
using cuda::kMaxBlocks;
using cuda::kThreads;
using cuda::threads_for_row;

using cuda::block_max_skip_nan;
using cuda::cpu_max;
using cuda::exp_of;
using cuda::grid_for_rows;
using cuda::log_of;
using cuda::max_skip_nan;
using cuda::sqrt_of;

// x as [rows, d] over the last dim (a scalar is one row of 1), as rows_of in cpu_norm.cpp.
struct Rows {
  int64_t rows, d;
};
Rows rows_of(const Tensor& x) {
  const int64_t d = x.rank() == 0 ? 1 : x.shape()[x.rank() - 1];
  return {d == 0 ? 0 : x.numel() / d, d};
}

// ---- softmax ----

// y = e^(x − m) / Σ e^(x − m) per row, m = max x (or y = x − m − log Σ e^(x − m) when `log`);
// a row whose max is -inf gives 0 (log: -inf). x, y as [rows, d]; one block per row; sums in T.
template <typename T>
__global__ void softmax_kernel(const T* x, int64_t rows, int64_t d, bool log, T* y) {
  __shared__ T shared[32];
  const T minus_inf = static_cast<T>(-INFINITY);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    T m = minus_inf;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) m = max_skip_nan(m, xr[j]);
    m = block_max_skip_nan(m, shared);
    if (m == minus_inf) {  // nothing to attend to: defined, not NaN (the same for the block)
      for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = log ? minus_inf : T(0);
      continue;
    }
    T s = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += exp_of(xr[j] - m);
    s = block_sum(s, shared);
    if (log) {
      const T log_s = log_of(s);
      for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = xr[j] - m - log_s;
    } else {
      const T inv = T(1) / s;
      for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = exp_of(xr[j] - m) * inv;
    }
  }
}

// dx = y ⊙ (dy − Σ dy ⊙ y)  (softmax)     dx = dy − e^y Σ dy  (log_softmax; e^-inf = 0)
// y, dy, dx as [rows, d]; one block per row; the sum in T.
template <typename T>
__global__ void softmax_backward_kernel(const T* y, const T* dy, int64_t rows, int64_t d,
                                        bool log, T* dx) {
  __shared__ T shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* yr = y + r * d;
    const T* gr = dy + r * d;
    T* dr = dx + r * d;
    T s = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += log ? gr[j] : gr[j] * yr[j];
    s = block_sum(s, shared);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      dr[j] = log ? rows::log_softmax_grad(exp_of(yr[j]), gr[j], s) : rows::softmax_grad(yr[j], gr[j], s);
    }
  }
}

// ---- layer norm ----

// Per row: mean = Σ x / d, var = Σ (x − mean)² / d (two passes: no cancellation),
// rstd = 1/√(var + eps), y = (x − mean) · rstd · gamma + beta. x, y as [rows, d]; gamma,
// beta as [d]; mean, rstd as [rows]. One block per row; sums in T.
template <typename T>
__global__ void layer_norm_kernel(const T* x, const T* gamma, const T* beta, int64_t rows,
                                  int64_t d, T eps, T* y, T* mean, T* rstd) {
  __shared__ T shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    T s = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += xr[j];
    s = block_sum(s, shared);
    const T m = s / static_cast<T>(d);
    T v = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) v += (xr[j] - m) * (xr[j] - m);
    v = block_sum(v, shared);
    const T inv = T(1) / sqrt_of(v / static_cast<T>(d) + eps);
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = inv;
    }
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      yr[j] = rows::layer_norm_value(xr[j], m, inv, gamma[j], beta[j]);
    }
  }
}

// With x̂ = (x − mean)·rstd and h = dy ⊙ gamma:  dx = rstd · (h − mean(h) − x̂ · mean(h ⊙ x̂)).
// x, dy, dx as [rows, d]; gamma as [d]; mean, rstd as [rows]. One block per row; sums in T.
template <typename T>
__global__ void layer_norm_dx_kernel(const T* x, const T* gamma, const T* mean, const T* rstd,
                                     const T* dy, int64_t rows, int64_t d, T* dx) {
  __shared__ T shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    const T* gr = dy + r * d;
    T* dr = dx + r * d;
    const T m = mean[r], rstd_r = rstd[r];
    T mean_h = 0, mean_hx = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const T h = gr[j] * gamma[j];
      mean_h += h;
      mean_hx += h * (xr[j] - m) * rstd_r;
    }
    mean_h = block_sum(mean_h, shared) / static_cast<T>(d);
    mean_hx = block_sum(mean_hx, shared) / static_cast<T>(d);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      dr[j] = rows::layer_norm_grad(xr[j], gr[j], gamma[j], m, rstd_r, mean_h, mean_hx);
    }
  }
}

constexpr int64_t kRowsPerPart = 32;  // rows per partial sum of dgamma, dbeta (as the CPU)

// part_gamma[b, j] = Σ dy[r, j] · x̂[r, j] and part_beta[b, j] = Σ dy[r, j] over the rows r of
// block b (rows b·32 .. b·32 + 31, in order). x, dy as [rows, d]; parts as [blocks, d].
// One thread per (b, j), j fastest: neighbouring threads read neighbouring columns.
template <typename T>
__global__ void layer_norm_param_parts_kernel(const T* x, const T* mean, const T* rstd,
                                              const T* dy, int64_t rows, int64_t d,
                                              int64_t blocks, T* part_gamma, T* part_beta) {
  const int64_t items = blocks * d;
  for (int64_t item = cuda::first_index(); item < items; item += cuda::index_step()) {
    const int64_t b = item / d, j = item % d;
    const int64_t end = (b + 1) * kRowsPerPart < rows ? (b + 1) * kRowsPerPart : rows;
    T sum_gamma = 0, sum_beta = 0;
    for (int64_t r = b * kRowsPerPart; r < end; ++r) {
      const T g = dy[r * d + j];
      sum_gamma += g * (x[r * d + j] - mean[r]) * rstd[r];
      sum_beta += g;
    }
    part_gamma[item] = sum_gamma;
    part_beta[item] = sum_beta;
  }
}

// dgamma[j] = Σ_b part_gamma[b, j], dbeta[j] = Σ_b part_beta[b, j], b in order (each may be
// null: not written). One thread per column j; blocks may be 0 (then both are 0).
template <typename T>
__global__ void layer_norm_param_sum_kernel(const T* part_gamma, const T* part_beta, int64_t d,
                                            int64_t blocks, T* dgamma, T* dbeta) {
  for (int64_t j = cuda::first_index(); j < d; j += cuda::index_step()) {
    T sum_gamma = 0, sum_beta = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      sum_gamma += part_gamma[b * d + j];
      sum_beta += part_beta[b * d + j];
    }
    if (dgamma) dgamma[j] = sum_gamma;
    if (dbeta) dbeta[j] = sum_beta;
  }
}

// ---- RMS norm ----

// Per row: rstd = 1/√(Σ x² / d + eps), y = x · rstd · gamma. x, y as [rows, d]; gamma as [d];
// rstd as [rows]. One block per row; the sum in T.
template <typename T>
__global__ void rms_norm_kernel(const T* x, const T* gamma, int64_t rows, int64_t d, T eps, T* y, T* rstd) {
  __shared__ T shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    T s = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += xr[j] * xr[j];
    s = block_sum(s, shared);
    const T inv = T(1) / sqrt_of(s / static_cast<T>(d) + eps);
    if (threadIdx.x == 0) rstd[r] = inv;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = rows::rms_norm_value(xr[j], inv, gamma[j]);
  }
}

// With x̂ = x·rstd and h = dy ⊙ gamma:  dx = rstd · (h − x̂ · mean(h ⊙ x̂)). One block per row.
template <typename T>
__global__ void rms_norm_dx_kernel(const T* x, const T* gamma, const T* rstd, const T* dy, int64_t rows,
                                   int64_t d, T* dx) {
  __shared__ T shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    const T* gr = dy + r * d;
    T* dr = dx + r * d;
    const T rstd_r = rstd[r];
    T mean_hx = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) mean_hx += gr[j] * gamma[j] * xr[j] * rstd_r;
    mean_hx = block_sum(mean_hx, shared) / static_cast<T>(d);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) dr[j] = rows::rms_norm_grad(xr[j], gr[j], gamma[j], rstd_r, mean_hx);
  }
}

// part[b, j] = Σ dy[r, j] · x[r, j] · rstd[r] over the rows r of block b (32 rows, in order), as
// layer_norm_param_parts_kernel; then layer_norm_param_sum_kernel adds the blocks in order.
template <typename T>
__global__ void rms_norm_gamma_parts_kernel(const T* x, const T* rstd, const T* dy, int64_t rows, int64_t d,
                                            int64_t blocks, T* part) {
  const int64_t items = blocks * d;
  for (int64_t item = cuda::first_index(); item < items; item += cuda::index_step()) {
    const int64_t b = item / d, j = item % d;
    const int64_t end = (b + 1) * kRowsPerPart < rows ? (b + 1) * kRowsPerPart : rows;
    T sum = 0;
    for (int64_t r = b * kRowsPerPart; r < end; ++r) sum += dy[r * d + j] * x[r * d + j] * rstd[r];
    part[item] = sum;
  }
}

// ---- l2 normalisation ----

// norm = ‖x‖ = √(Σ x²), y = x / max(‖x‖, eps) per row (a NaN norm stays NaN, as std::max
// keeps it). x, y as [rows, d]; norm as [rows]. One block per row; the sum in T.
template <typename T>
__global__ void l2_normalize_kernel(const T* x, int64_t rows, int64_t d, T eps, T* y, T* norm) {
  __shared__ T shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    T s = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += xr[j] * xr[j];
    s = block_sum(s, shared);
    const T n = sqrt_of(s);
    if (threadIdx.x == 0) norm[r] = n;
    const T inv = T(1) / cpu_max(n, eps);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = xr[j] * inv;
  }
}

// dx = (dy − [‖x‖ > eps] · y (y·dy)) / max(‖x‖, eps): above eps only the part of dy tangent to
// the unit sphere survives; at or below eps, y = x/eps is linear in x. y, dy, dx as [rows, d];
// norm as [rows]. One block per row; the dot product in T.
template <typename T>
__global__ void l2_normalize_backward_kernel(const T* y, const T* norm, T eps, const T* dy,
                                             int64_t rows, int64_t d, T* dx) {
  __shared__ T shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* yr = y + r * d;
    const T* gr = dy + r * d;
    T* dr = dx + r * d;
    const T n = norm[r];
    const T inv = T(1) / cpu_max(n, eps);
    T dot = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) dot += yr[j] * gr[j];
    dot = block_sum(dot, shared);  // every thread takes part, then the indicator applies
    if (!(n > eps)) dot = T(0);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) dr[j] = rows::l2_normalize_grad(yr[j], gr[j], inv, dot);
  }
}

}  // namespace

void CudaBackend::softmax(const Tensor& x, Tensor& y, bool log) {
  const Rows dims = rows_of(x);
  if (dims.rows == 0) return;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    softmax_kernel<T><<<grid_for_rows(dims.rows), threads_for_row(dims.d)>>>(
        x.data<T>(), dims.rows, dims.d, log, y.data<T>());
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx, bool log) {
  const Rows dims = rows_of(y);
  if (dims.rows == 0) return;
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    softmax_backward_kernel<T><<<grid_for_rows(dims.rows), threads_for_row(dims.d)>>>(
        y.data<T>(), dy.data<T>(), dims.rows, dims.d, log, dx.data<T>());
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                             Tensor& y, Tensor& mean, Tensor& rstd) {
  const Rows dims = rows_of(x);
  if (dims.rows == 0) return;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    layer_norm_kernel<T><<<grid_for_rows(dims.rows), threads_for_row(dims.d)>>>(
        x.data<T>(), gamma.data<T>(), beta.data<T>(), dims.rows, dims.d, static_cast<T>(eps),
        y.data<T>(), mean.data<T>(), rstd.data<T>());
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                      const Tensor& rstd, const Tensor& dy, Tensor* dx,
                                      Tensor* dgamma, Tensor* dbeta) {
  const Rows dims = rows_of(x);
  const int64_t rows = dims.rows, d = dims.d;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (dx && rows > 0) {
      layer_norm_dx_kernel<T><<<grid_for_rows(rows), threads_for_row(d)>>>(
          x.data<T>(), gamma.data<T>(), mean.data<T>(), rstd.data<T>(), dy.data<T>(), rows, d,
          dx->data<T>());
      QKGRAD_CUDA_LAUNCHED();
    }
    if ((dgamma || dbeta) && d > 0) {
      // Partial sums per block of 32 rows into scratch, then the blocks in order per column.
      const int64_t blocks = (rows + kRowsPerPart - 1) / kRowsPerPart;
      const int64_t part_size = std::max<int64_t>(1, blocks * d);
      Tensor part_gamma = Tensor::empty({part_size}, x.dtype(), Device::cuda);
      Tensor part_beta = Tensor::empty({part_size}, x.dtype(), Device::cuda);
      if (blocks > 0) {
        layer_norm_param_parts_kernel<T><<<grid_for(blocks * d), kThreads>>>(
            x.data<T>(), mean.data<T>(), rstd.data<T>(), dy.data<T>(), rows, d, blocks,
            part_gamma.data<T>(), part_beta.data<T>());
        QKGRAD_CUDA_LAUNCHED();
      }
      layer_norm_param_sum_kernel<T><<<grid_for(d), kThreads>>>(
          part_gamma.data<T>(), part_beta.data<T>(), d, blocks,
          dgamma ? dgamma->data<T>() : nullptr, dbeta ? dbeta->data<T>() : nullptr);
      QKGRAD_CUDA_LAUNCHED();
    }
  });
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& gamma, double eps, Tensor& y, Tensor& rstd) {
  const Rows dims = rows_of(x);
  if (dims.rows == 0) return;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    rms_norm_kernel<T><<<grid_for_rows(dims.rows), threads_for_row(dims.d)>>>(
        x.data<T>(), gamma.data<T>(), dims.rows, dims.d, static_cast<T>(eps), y.data<T>(), rstd.data<T>());
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& rstd, const Tensor& dy,
                                    Tensor* dx, Tensor* dgamma) {
  const Rows dims = rows_of(x);
  const int64_t rows = dims.rows, d = dims.d;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (dx && rows > 0) {
      rms_norm_dx_kernel<T><<<grid_for_rows(rows), threads_for_row(d)>>>(
          x.data<T>(), gamma.data<T>(), rstd.data<T>(), dy.data<T>(), rows, d, dx->data<T>());
      QKGRAD_CUDA_LAUNCHED();
    }
    if (dgamma && d > 0) {  // as layer_norm's dgamma: blocks of 32 rows, then the blocks in order
      const int64_t blocks = (rows + kRowsPerPart - 1) / kRowsPerPart;
      Tensor part = Tensor::empty({std::max<int64_t>(1, blocks * d)}, x.dtype(), Device::cuda);
      if (blocks > 0) {
        rms_norm_gamma_parts_kernel<T><<<grid_for(blocks * d), kThreads>>>(x.data<T>(), rstd.data<T>(), dy.data<T>(), rows,
                                                                          d, blocks, part.data<T>());
        QKGRAD_CUDA_LAUNCHED();
      }
      layer_norm_param_sum_kernel<T><<<grid_for(d), kThreads>>>(part.data<T>(), part.data<T>(), d, blocks,
                                                                dgamma->data<T>(), nullptr);
      QKGRAD_CUDA_LAUNCHED();
    }
  });
}

void CudaBackend::l2_normalize(const Tensor& x, double eps, Tensor& y, Tensor& norm) {
  const Rows dims = rows_of(x);
  if (dims.rows == 0) return;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    l2_normalize_kernel<T><<<grid_for_rows(dims.rows), threads_for_row(dims.d)>>>(
        x.data<T>(), dims.rows, dims.d, static_cast<T>(eps), y.data<T>(), norm.data<T>());
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::l2_normalize_backward(const Tensor& y, const Tensor& norm, double eps,
                                        const Tensor& dy, Tensor& dx) {
  const Rows dims = rows_of(y);
  if (dims.rows == 0) return;
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    l2_normalize_backward_kernel<T><<<grid_for_rows(dims.rows), threads_for_row(dims.d)>>>(
        y.data<T>(), norm.data<T>(), static_cast<T>(eps), dy.data<T>(), dims.rows, dims.d,
        dx.data<T>());
  });
  QKGRAD_CUDA_LAUNCHED();
}

}  // namespace qkgrad
