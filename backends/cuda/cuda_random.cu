// Dropout and word dropout on the GPU, drawing from the same Philox stream as the CPU
// (core/philox.h is compiled for both): element i reads 32-bit word i % 4 of block
// first_block + i / 4, and keeps its value when that word is >= threshold. The threshold and
// the scale 1/(1 − p) are computed on the host exactly as backends/cpu/cpu_random.cpp computes
// them, so the masks are identical to the CPU's bit for bit, and so are the kept values
// (one multiply by the same scale). fill_uniform and fill_normal live in cuda_backend.cu.
//
// Work split: one thread per Philox block, i.e. per group of four consecutive elements (one
// Philox evaluation gives the words of all four), in a grid-stride loop over the blocks.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_common.cuh"
#include "core/backend.h"
#include "core/philox.h"
#include "core/tensor.h"

namespace qkgrad {

namespace {

using cuda::first_index;
using cuda::grid_for;
using cuda::index_step;
using cuda::kThreads;

constexpr int64_t kWordsPerBlock = 4;  // 32-bit words per Philox block

// The Philox blocks covering n elements (the last one may be partly used).
__host__ __device__ int64_t blocks_for(int64_t n) {
  return (n + kWordsPerBlock - 1) / kWordsPerBlock;
}

// y[i] = word(i) >= threshold ? x[i] · scale : 0, x and y [n] (y may be x), and the keep bit
// of element i set in mask word i / 32 (bit i % 32; the words zeroed before the launch). Thread
// `blk` owns elements 4·blk .. 4·blk + 3 (those < n) and Philox block first_block + blk: its
// four bits are one nibble of a word that eight threads share (atomicOr).
template <typename T>
__global__ void dropout_kernel(const T* x, T* y, unsigned int* mask, int64_t n, RandomStream rs,
                               uint32_t threshold, T scale) {
  const int64_t blocks = blocks_for(n);
  for (int64_t blk = first_index(); blk < blocks; blk += index_step()) {
    const philox::Block words =
        philox::random_block(rs.seed, rs.stream, rs.first_block + static_cast<uint64_t>(blk));
    unsigned int nibble = 0;
    for (int64_t w = 0; w < kWordsPerBlock; ++w) {
      const int64_t i = blk * kWordsPerBlock + w;
      if (i >= n) break;
      const bool keep = words.v[w] >= threshold;
      y[i] = keep ? x[i] * scale : T(0);
      nibble |= static_cast<unsigned int>(keep) << w;
    }
    if (nibble != 0) atomicOr(mask + blk / 8, nibble << (4 * (blk % 8)));
  }
}

// dx[i] = bit i of mask ? dy[i] · scale : 0, dy and dx [n] (dx may be dy). One thread per element.
template <typename T>
__global__ void dropout_backward_kernel(const T* dy, const unsigned int* mask, T* dx, int64_t n, T scale) {
  for (int64_t i = first_index(); i < n; i += index_step()) {
    dx[i] = (mask[i / 32] >> (i % 32)) & 1u ? dy[i] * scale : T(0);
  }
}

// out[i] = can_keep && word(i) >= threshold ? ids[i] : replacement, ids and out [n] (i64).
// can_keep is p < 1: p = 1 drops every id (the threshold saturates at 2³² − 1, which a word can
// still equal). Same thread layout as dropout_kernel.
__global__ void word_dropout_kernel(const int64_t* ids, int64_t* out, int64_t n, RandomStream rs,
                                    uint32_t threshold, bool can_keep, int64_t replacement) {
  const int64_t blocks = blocks_for(n);
  for (int64_t blk = first_index(); blk < blocks; blk += index_step()) {
    const philox::Block words =
        philox::random_block(rs.seed, rs.stream, rs.first_block + static_cast<uint64_t>(blk));
    for (int64_t w = 0; w < kWordsPerBlock; ++w) {
      const int64_t i = blk * kWordsPerBlock + w;
      if (i < n) out[i] = can_keep && words.v[w] >= threshold ? ids[i] : replacement;
    }
  }
}

}  // namespace

void CudaBackend::dropout(const Tensor& x, double p, RandomStream rs, Tensor& y, Tensor& mask) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const uint32_t threshold = dropout_threshold(p);
  auto* bits = reinterpret_cast<unsigned int*>(mask.data<int64_t>());
  QKGRAD_CUDA_CHECK(cudaMemsetAsync(bits, 0, static_cast<std::size_t>(mask.nbytes())));
  cuda::dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T scale = static_cast<T>(1.0 / (1.0 - p));  // in double, then rounded: as on the CPU
    dropout_kernel<T><<<grid_for(blocks_for(n)), kThreads>>>(x.data<T>(), y.data<T>(), bits, n, rs,
                                                             threshold, scale);
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::dropout_backward(const Tensor& dy, const Tensor& mask, double p, Tensor& dx) {
  const int64_t n = dy.numel();
  if (n == 0) return;
  const auto* bits = reinterpret_cast<const unsigned int*>(mask.data<int64_t>());
  cuda::dispatch(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T scale = static_cast<T>(1.0 / (1.0 - p));
    dropout_backward_kernel<T><<<grid_for(n), kThreads>>>(dy.data<T>(), bits, dx.data<T>(), n, scale);
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::word_dropout(const Tensor& ids, double p, int64_t replacement, RandomStream rs,
                               Tensor& out) {
  const int64_t n = ids.numel();
  if (n == 0) return;
  word_dropout_kernel<<<grid_for(blocks_for(n)), kThreads>>>(
      ids.data<int64_t>(), out.data<int64_t>(), n, rs, dropout_threshold(p), p < 1, replacement);
  QKGRAD_CUDA_LAUNCHED();
}

}  // namespace qkgrad
