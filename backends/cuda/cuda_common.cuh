// Small helpers shared by the CUDA kernels (nvcc only): dtype dispatch, launch sizes and the
// launch check, NumPy broadcasting offsets, and deterministic warp/block reductions.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/dtype_dispatch.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/tensor.h"

// After every kernel launch: a launch that failed (bad configuration, no kernel image for this
// GPU) throws naming the file and line instead of failing silently later.
#define QKGRAD_CUDA_LAUNCHED() QKGRAD_CUDA_CHECK(cudaGetLastError())

namespace qkgrad::cuda {

using kernels::dispatch;      // backends/dtype_dispatch.h
using kernels::dispatch_all;

// Elementwise kernels use grid-stride loops over int64 indices with kThreads per block and at
// most kMaxBlocks blocks (enough to fill any current GPU several times over).
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, kMaxBlocks)));
}

// for (int64_t i : grid_stride(n)) style loop bounds, written out in each kernel as
//   for (int64_t i = first_index(); i < n; i += index_step()) ...
__device__ inline int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t index_step() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Where element `i` of an output of shape out_dims reads an input broadcast to it (NumPy rules,
// aligned from the right; a broadcast dimension has stride 0). Passed to kernels by value.
struct BroadcastOffsets {
  int rank = 0;
  int64_t out_dims[Shape::kMaxRank] = {};
  int64_t stride[Shape::kMaxRank] = {};

  // Fully unrolled over kMaxRank so the arrays stay in registers (a loop bounded by the
  // runtime rank makes nvcc copy the struct to local memory).
  __host__ __device__ int64_t offset(int64_t i) const {
    int64_t off = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int axis = Shape::kMaxRank - 1; axis >= 0; --axis) {
      if (axis < rank) {
        const int64_t coord = i % out_dims[axis];
        i /= out_dims[axis];
        off += coord * stride[axis];
      }
    }
    return off;
  }
};

inline BroadcastOffsets broadcast_offsets(const Shape& in, const Shape& out) {
  BroadcastOffsets b;
  b.rank = out.rank();
  const auto in_strides = in.strides();
  const int shift = out.rank() - in.rank();
  for (int axis = 0; axis < out.rank(); ++axis) {
    b.out_dims[axis] = out[axis];
    const int in_axis = axis - shift;
    if (in_axis >= 0 && in[in_axis] != 1) b.stride[axis] = in_strides[static_cast<std::size_t>(in_axis)];
  }
  return b;
}

// ---- math in the kernel's own precision: float calls the f-suffixed functions, never the
// fast approximate intrinsics (__expf and friends) ----
__device__ inline float exp_of(float v) { return expf(v); }
__device__ inline double exp_of(double v) { return exp(v); }
__device__ inline float log_of(float v) { return logf(v); }
__device__ inline double log_of(double v) { return log(v); }
__device__ inline float tanh_of(float v) { return tanhf(v); }
__device__ inline double tanh_of(double v) { return tanh(v); }
__device__ inline float sqrt_of(float v) { return sqrtf(v); }  // IEEE-exact, like the CPU's
__device__ inline double sqrt_of(double v) { return sqrt(v); }
__device__ inline float pow_of(float v, float e) { return powf(v, e); }
__device__ inline double pow_of(double v, double e) { return pow(v, e); }
__device__ inline float abs_of(float v) { return fabsf(v); }
__device__ inline double abs_of(double v) { return fabs(v); }

template <typename T>
__host__ __device__ inline bool is_nan(T v) {
  return v != v;
}
template <typename T>
__host__ __device__ inline bool is_finite(T v) {
  return !is_nan(v) && v != static_cast<T>(INFINITY) && v != static_cast<T>(-INFINITY);
}

// ---- the maxima the kernels need ----
// std::max(a, b) as the CPU loops use it (a < b ? b : a): with a NaN b it keeps a.
template <typename T>
__host__ __device__ inline T cpu_max(T a, T b) {
  return a < b ? b : a;
}
// max that keeps NaN (fmax would drop it: a NaN must never turn into a clean number).
template <typename T>
__host__ __device__ inline T max_keep_nan(T a, T b) {
  return (a != a || a > b) ? a : b;
}
// The larger of a and b where a NaN counts as smaller than everything (NaN only if both are):
// the CPU's softmax and max fold std::max from -inf or from x[0], which skips later NaNs.
template <typename T>
__host__ __device__ inline T max_skip_nan(T a, T b) {
  return (b > a || a != a) ? b : a;
}

// The same operations as function objects, for block_reduce.
struct Plus {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxKeepNan {
  template <typename T>
  __device__ T operator()(T a, T b) const { return max_keep_nan(a, b); }
};
struct MaxSkipNan {
  template <typename T>
  __device__ T operator()(T a, T b) const { return max_skip_nan(a, b); }
};

// ---- deterministic reductions: a fixed butterfly inside a warp, then over the warps ----

template <typename T, typename Op>
__device__ inline T warp_reduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
template <typename T>
__device__ inline T warp_sum(T v) {
  return warp_reduce(v, Plus{});
}
template <typename T>
__device__ inline T warp_max(T v) {
  return warp_reduce(v, MaxKeepNan{});
}

// The reduction of v over the whole block with `op`, returned to every thread. blockDim.x must
// be a multiple of 32 (at most 1024); `identity` fills the lanes past the last warp; `shared`
// holds 32 values. Starts and ends with __syncthreads, so it can be called repeatedly with the
// same `shared`. Every warp reduces the per-warp results the same way, so all threads agree.
template <typename T, typename Op>
__device__ inline T block_reduce(T v, T identity, Op op, T* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  __syncthreads();
  v = warp_reduce(v, op);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T total = lane < warps ? shared[lane] : identity;
  return warp_reduce(total, op);
}
template <typename T>
__device__ inline T block_sum(T v, T* shared) {
  return block_reduce(v, T(0), Plus{}, shared);
}
// The maximum of v over the block, NaN if any v is NaN.
template <typename T>
__device__ inline T block_max(T v, T* shared) {
  return block_reduce(v, static_cast<T>(-INFINITY), MaxKeepNan{}, shared);
}
// The maximum over the block of the non-NaN values v (-inf if there are none).
template <typename T>
__device__ inline T block_max_skip_nan(T v, T* shared) {
  return block_reduce(v, static_cast<T>(-INFINITY), MaxSkipNan{}, shared);
}

// The CPU's max of the row src[0..n) (n >= 1), computed by the whole block and returned to
// every thread: the maximum over the non-NaN elements, or src[0] when that is NaN (the CPU
// folds std::max from src[0]).
template <typename T>
__device__ inline T row_max(const T* src, int64_t n, T* shared) {
  T m = static_cast<T>(-INFINITY);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = max_skip_nan(m, src[j]);
  m = block_max_skip_nan(m, shared);
  return is_nan(src[0]) ? src[0] : m;
}

// A grid of one block per row, at most kMaxBlocks (the kernels loop over the rows).
inline unsigned grid_for_rows(int64_t rows) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(rows, kMaxBlocks)));
}

// Threads per block for a kernel that gives one block to each row of n elements: a multiple of
// 32 between 32 and 1024, about one element per thread for short rows.
inline int threads_for_row(int64_t n) {
  int t = 32;
  while (t < 1024 && t < n) t *= 2;
  return t;
}

}  // namespace qkgrad::cuda
