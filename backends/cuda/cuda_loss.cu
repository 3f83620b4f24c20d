// The fused label-smoothed cross-entropy on the GPU (the CUDA side of
// backends/cpu/cpu_loss.cpp): log-sum-exp, the smoothed target distribution and the per-row
// loss in one pass over the logits; the backward writes dloss · (softmax − q) directly.
//
// logits are [rows, V] (V can be 8000 and more), targets (int64) [rows]. One block per row
// (threads_for_row(V) threads, looping over the rows when there are more than kMaxBlocks):
// the threads stride along the row (coalesced) and the row's max and sums come from fixed
// trees (block_sum), so results repeat bit for bit. Sums are in T, as on the CPU.
//
// Targets: the op (ops/loss.cpp) has already checked that each one is ignore_index or in
// [0, V). Should a bad one arrive anyway, its row gets NaN (loss and gradient) rather than
// a read out of bounds.
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
using cuda::kMaxBlocks;
using cuda::threads_for_row;

using cuda::exp_of;
using cuda::grid_for_rows;
using cuda::log_of;
using cuda::row_max;

// Per row r, with m = max z, lse = m + log Σ e^(z − m) and q = on·onehot(t) + off
// (on = 1 − ε, off = ε/V):
//   lse[r] = lse;  loss[r] = −Σ q (z − lse) = lse − on·z_t − off·Σ z   (both 0, and the row
//   not read, if t is ignore_index: padding costs no pass over V)
// A term with weight 0 is left out rather than multiplied: a logit of −∞ (a masked class)
// would make 0 · (−∞) = NaN. z as [rows, v]; targets, loss, lse as [rows]. One block per row.
template <typename T>
__global__ void cross_entropy_kernel(const T* z, const int64_t* targets, int64_t rows, int64_t v,
                                     T on, T off, int64_t ignore_index, T* loss, T* lse) {
  __shared__ T shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    if (targets[r] == ignore_index) {  // a padding row: no loss, no gradient, so no pass over V
      if (threadIdx.x == 0) loss[r] = lse[r] = T(0);
      continue;
    }
    const T* zr = z + r * v;
    const T m = row_max(zr, v, shared);
    T s = 0, total = 0;
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
      s += exp_of(zr[j] - m);
      total += zr[j];
    }
    s = block_sum(s, shared);
    total = block_sum(total, shared);
    if (threadIdx.x == 0) {
      const T l = m + log_of(s);
      lse[r] = l;
      const int64_t t = targets[r];
      if (t < 0 || t >= v) {
        loss[r] = static_cast<T>(NAN);  // never read out of bounds (see the top of the file)
      } else {
        loss[r] = rows::smoothed_cross_entropy(l, zr[t], total, on, off);
      }
    }
  }
}

// dlogits[r, j] = dloss · (e^(z − lse) − off − on·[j == t])  (= dloss · (softmax(z) − q)),
// 0 on rows whose target is ignore_index. dloss is one element on the device, read here (no
// copy to the host). z, dlogits as [rows, v]; lse, targets as [rows]. One block per row; no
// reductions, every element is independent.
template <typename T>
__global__ void cross_entropy_backward_kernel(const T* z, const T* lse, const int64_t* targets,
                                              int64_t rows, int64_t v, T on, T off,
                                              int64_t ignore_index, const T* dloss, T* dlogits) {
  const T scale = dloss[0];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* zr = z + r * v;
    T* dr = dlogits + r * v;
    const int64_t t = targets[r];
    if (t == ignore_index) {
      for (int64_t j = threadIdx.x; j < v; j += blockDim.x) dr[j] = T(0);
    } else if (t < 0 || t >= v) {
      for (int64_t j = threadIdx.x; j < v; j += blockDim.x) dr[j] = static_cast<T>(NAN);
    } else {
      const T l = lse[r];
      for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
        dr[j] = rows::smoothed_cross_entropy_grad(scale, exp_of(zr[j] - l), off, j == t, on);  // p − q
      }
    }
  }
}

}  // namespace

void CudaBackend::cross_entropy(const Tensor& logits, const Tensor& targets, double smoothing,
                                int64_t ignore_index, Tensor& row_loss, Tensor& lse) {
  const int64_t v = logits.size(-1), rows = v == 0 ? 0 : logits.numel() / v;
  if (rows == 0) return;
  dispatch(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // The weights in T, computed exactly as the CPU does.
    const T eps = static_cast<T>(smoothing), on = T(1) - eps, off = eps / static_cast<T>(v);
    cross_entropy_kernel<T><<<grid_for_rows(rows), threads_for_row(v)>>>(
        logits.data<T>(), targets.data<int64_t>(), rows, v, on, off, ignore_index,
        row_loss.data<T>(), lse.data<T>());
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::cross_entropy_backward(const Tensor& logits, const Tensor& lse,
                                         const Tensor& targets, double smoothing,
                                         int64_t ignore_index, const Tensor& dloss,
                                         Tensor& dlogits) {
  const int64_t v = logits.size(-1), rows = v == 0 ? 0 : logits.numel() / v;
  if (rows == 0) return;
  dispatch(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T eps = static_cast<T>(smoothing), on = T(1) - eps, off = eps / static_cast<T>(v);
    cross_entropy_backward_kernel<T><<<grid_for_rows(rows), threads_for_row(v)>>>(
        logits.data<T>(), lse.data<T>(), targets.data<int64_t>(), rows, v, on, off, ignore_index,
        dloss.data<T>(), dlogits.data<T>());
  });
  QKGRAD_CUDA_LAUNCHED();
}

}  // namespace qkgrad
