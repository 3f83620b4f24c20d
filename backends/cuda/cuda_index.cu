// Data movement on the GPU: permutes, block copies (concat, slice, pad), and indexed reads and
// their scatter-add backwards, the CUDA counterpart of backends/cpu/cpu_index.cpp. The scatters
// use no atomics: each thread owns one output column and adds its contributions in index order,
// so there are no races and the results repeat bit for bit.
//
// Ids are checked against their range by the ops (ops/validate.cpp) before these kernels run.
// As a last guard against memory corruption the kernels never follow an out-of-range id: a read
// through one gives NaN, an add through one is dropped.
#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_common.cuh"
#include "core/tensor.h"

namespace qkgrad {

namespace {

using cuda::BroadcastOffsets;
using cuda::dispatch;
using cuda::grid_for;
using cuda::kThreads;

__device__ inline bool id_in_range(int64_t id, int64_t n) { return id >= 0 && id < n; }

// out[e] = x[offset(e)]: offset(e) takes the coordinates of output element e (row-major over
// out's shape) times the input stride of each output axis, x_stride[perm[axis]]. That is the
// arithmetic of BroadcastOffsets, reused here. One thread per output element (grid-stride):
// the writes are coalesced, the reads strided.
template <typename T>
__global__ void permute_kernel(const T* x, T* out, int64_t total, BroadcastOffsets in) {
  for (int64_t e = cuda::first_index(); e < total; e += cuda::index_step()) {
    out[e] = x[in.offset(e)];
  }
}

// src as [outer, src_n, inner], dst as [outer, dst_n, inner]; for j < len:
//   dst[o, dst_start + j, i] (+)= src[o, src_start + j, i]
// Element e of the copied block is (o, r) with r = j * inner + i < run = len * inner.
// One thread per copied element (grid-stride).
template <typename T>
__global__ void copy_block_kernel(const T* src, int64_t src_n, int64_t src_start, T* dst,
                                  int64_t dst_n, int64_t dst_start, int64_t run, int64_t inner,
                                  int64_t total, bool accumulate) {
  for (int64_t e = cuda::first_index(); e < total; e += cuda::index_step()) {
    const int64_t o = e / run, r = e % run;
    const T value = src[(o * src_n + src_start) * inner + r];
    T& to = dst[(o * dst_n + dst_start) * inner + r];
    to = accumulate ? to + value : value;
  }
}

// x as [outer, n, inner], ids as [k], out as [outer, k, inner]:
//   out[o, j, i] = x[o, ids[j], i]
// One thread per output element (grid-stride); consecutive threads read consecutive i.
template <typename T>
__global__ void index_select_kernel(const T* x, const int64_t* ids, T* out, int64_t n, int64_t k,
                                    int64_t inner, int64_t total) {
  for (int64_t e = cuda::first_index(); e < total; e += cuda::index_step()) {
    const int64_t i = e % inner, row = e / inner;  // row = o * k + j
    const int64_t j = row % k, o = row / k;
    const int64_t id = ids[j];
    out[e] = id_in_range(id, n) ? x[(o * n + id) * inner + i] : T(NAN);
  }
}

// x as [n, in_width], ids as [k], out as [k, out_width]: out[j, c] = x[ids[j], c] for c < used.
// One thread per copied element (grid-stride).
template <typename T>
__global__ void index_select_prefix_kernel(const T* x, const int64_t* ids, T* out, int64_t n,
                                           int64_t in_width, int64_t out_width, int64_t used,
                                           int64_t total) {
  for (int64_t e = cuda::first_index(); e < total; e += cuda::index_step()) {
    const int64_t j = e / used, c = e % used;
    const int64_t id = ids[j];
    out[j * out_width + c] = id_in_range(id, n) ? x[id * in_width + c] : T(NAN);
  }
}

// dy as [outer, k, inner], ids as [k], dx as [outer, n, inner]:
//   dx[o, ids[j], i] += dy[o, j, i]   for j = 0, 1, ..., k - 1 in order
// One thread per column (o, i) (grid-stride over outer * inner): the thread alone writes
// dx[o, :, i], so repeated ids add up without races, in the same order as the CPU.
// Consecutive threads take consecutive i, so each step of the j loop is coalesced.
template <typename T>
__global__ void index_add_kernel(const T* dy, const int64_t* ids, T* dx, int64_t n, int64_t k,
                                 int64_t inner, int64_t columns) {
  for (int64_t c = cuda::first_index(); c < columns; c += cuda::index_step()) {
    const int64_t o = c / inner, i = c % inner;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t id = ids[j];
      if (id_in_range(id, n)) dx[(o * n + id) * inner + i] += dy[(o * k + j) * inner + i];
    }
  }
}

// x as [outer, n, inner], index and out as [outer, k, inner]:
//   out[o, j, i] = x[o, index[o, j, i], i]
// One thread per output element (grid-stride).
template <typename T>
__global__ void gather_kernel(const T* x, const int64_t* index, T* out, int64_t n, int64_t k,
                              int64_t inner, int64_t total) {
  for (int64_t e = cuda::first_index(); e < total; e += cuda::index_step()) {
    const int64_t i = e % inner, o = e / inner / k;
    const int64_t id = index[e];
    out[e] = id_in_range(id, n) ? x[(o * n + id) * inner + i] : T(NAN);
  }
}

// dy and index as [outer, k, inner], dx as [outer, n, inner]:
//   dx[o, index[o, j, i], i] += dy[o, j, i]   for j = 0, 1, ..., k - 1 in order
// One thread per column (o, i) (grid-stride over outer * inner), which alone writes
// dx[o, :, i]: no races, the CPU's order. Coalesced across i at each step of the j loop.
template <typename T>
__global__ void scatter_add_kernel(const T* dy, const int64_t* index, T* dx, int64_t n,
                                   int64_t k, int64_t inner, int64_t columns) {
  for (int64_t c = cuda::first_index(); c < columns; c += cuda::index_step()) {
    const int64_t o = c / inner, i = c % inner;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t at = (o * k + j) * inner + i;
      const int64_t id = index[at];
      if (id_in_range(id, n)) dx[(o * n + id) * inner + i] += dy[at];
    }
  }
}

}  // namespace

void CudaBackend::permute(const Tensor& x, const std::vector<int>& perm, Tensor& out) {
  const int64_t total = out.numel();
  if (total == 0) return;
  // Output axis `axis` walks x's axis perm[axis], whose row-major stride is x_strides[perm[axis]].
  // (Rank 0: no axes, offset 0, the one element is copied.)
  const Shape& os = out.shape();
  const auto x_strides = x.shape().strides();
  BroadcastOffsets in;
  in.rank = os.rank();
  for (int axis = 0; axis < os.rank(); ++axis) {
    in.out_dims[axis] = os[axis];
    in.stride[axis] = x_strides[static_cast<std::size_t>(perm[static_cast<std::size_t>(axis)])];
  }
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    permute_kernel<T><<<grid_for(total), kThreads>>>(x.data<T>(), out.data<T>(), total, in);
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::copy_block(const Tensor& src, int64_t src_n, int64_t src_start, Tensor& dst,
                             int64_t dst_n, int64_t dst_start, int64_t outer, int64_t len,
                             int64_t inner, bool accumulate) {
  const int64_t run = len * inner;  // contiguous elements per outer index
  const int64_t total = outer * run;
  if (total == 0) return;
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    copy_block_kernel<T><<<grid_for(total), kThreads>>>(src.data<T>(), src_n, src_start,
                                                         dst.data<T>(), dst_n, dst_start, run,
                                                         inner, total, accumulate);
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::index_select(const Tensor& x, const Tensor& ids, int64_t outer, int64_t n,
                               int64_t inner, Tensor& out) {
  const int64_t k = ids.numel();
  const int64_t total = outer * k * inner;
  if (total == 0) return;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    index_select_kernel<T><<<grid_for(total), kThreads>>>(x.data<T>(), ids.data<int64_t>(),
                                                           out.data<T>(), n, k, inner, total);
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::index_select_prefix(const Tensor& x, const Tensor& ids, int64_t used, Tensor& out) {
  const int64_t k = ids.numel(), n = x.size(0);
  const int64_t total = k * used;
  if (total == 0) return;
  const int64_t in_width = x.numel() / n, out_width = out.numel() / k;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    index_select_prefix_kernel<T><<<grid_for(total), kThreads>>>(x.data<T>(), ids.data<int64_t>(), out.data<T>(),
                                                                  n, in_width, out_width, used, total);
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::index_add(const Tensor& dy, const Tensor& ids, int64_t outer, int64_t n,
                            int64_t inner, Tensor& dx) {
  const int64_t k = ids.numel();
  const int64_t columns = outer * inner;
  if (columns == 0 || k == 0) return;  // nothing to add
  dispatch(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    index_add_kernel<T><<<grid_for(columns), kThreads>>>(dy.data<T>(), ids.data<int64_t>(),
                                                          dx.data<T>(), n, k, inner, columns);
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::gather(const Tensor& x, const Tensor& index, int64_t outer, int64_t n,
                         int64_t k, int64_t inner, Tensor& out) {
  const int64_t total = outer * k * inner;
  if (total == 0) return;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    gather_kernel<T><<<grid_for(total), kThreads>>>(x.data<T>(), index.data<int64_t>(),
                                                     out.data<T>(), n, k, inner, total);
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::scatter_add(const Tensor& dy, const Tensor& index, int64_t outer, int64_t n,
                              int64_t k, int64_t inner, Tensor& dx) {
  const int64_t columns = outer * inner;
  if (columns == 0 || k == 0) return;  // nothing to add
  dispatch(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    scatter_add_kernel<T><<<grid_for(columns), kThreads>>>(dy.data<T>(), index.data<int64_t>(),
                                                            dx.data<T>(), n, k, inner, columns);
  });
  QKGRAD_CUDA_LAUNCHED();
}

}  // namespace qkgrad
