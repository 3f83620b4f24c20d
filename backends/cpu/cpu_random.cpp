// Random fills from the Philox stream (core/philox.h). Each output element is a pure function
// of (seed, stream, block index), so the loop is parallel and the result identical on any
// number of threads and on the GPU.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_common.h"
#include "backends/cpu/cpu_philox.h"
#include "core/philox.h"

namespace qkgrad {

namespace {

// The four uniforms (f32: one per word) or two (f64: one per word pair) of block b, in (0, 1).
template <typename T>
void block_uniforms(const RandomStream& rs, int64_t b, double* u) {
  const philox::Block blk = philox::random_block(rs.seed, rs.stream, rs.first_block + static_cast<uint64_t>(b));
  if constexpr (sizeof(T) == 4) {
    for (int w = 0; w < 4; ++w) u[w] = philox::uniform_f32(blk.v[w]);
  } else {
    u[0] = philox::uniform_f64(blk.v[0], blk.v[1]);
    u[1] = philox::uniform_f64(blk.v[2], blk.v[3]);
  }
}

// Element e of the output comes from block e / per_block, slot e % per_block.
template <typename T, typename F>
void for_each_block(T* out, int64_t n, F values_of_block) {
  constexpr int64_t per_block = sizeof(T) == 4 ? 4 : 2;
  const int64_t blocks = (n + per_block - 1) / per_block;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t b = 0; b < blocks; ++b) {
    double v[4];
    values_of_block(b, v);
    for (int64_t s = 0; s < per_block && b * per_block + s < n; ++s) out[b * per_block + s] = static_cast<T>(v[s]);
  }
}

}  // namespace

void CpuBackend::fill_uniform(Tensor& out, double low, double high, RandomStream rs) {
  cpu::dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for_each_block(out.data<T>(), out.numel(), [&](int64_t b, double* v) {
      double u[4] = {0, 0, 0, 0};
      block_uniforms<T>(rs, b, u);
      // Written as fused multiply-adds so the value does not depend on whether the compiler
      // contracts a·b + c (-march=native does); the CUDA kernel computes the same fma.
      for (int s = 0; s < 4; ++s) v[s] = std::fma(high - low, u[s], low);
    });
  });
}

void CpuBackend::fill_normal(Tensor& out, double mean, double stddev, RandomStream rs) {
  cpu::dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for_each_block(out.data<T>(), out.numel(), [&](int64_t b, double* v) {
      double u[4] = {0, 0, 0, 0};
      block_uniforms<T>(rs, b, u);
      // Box-Muller, in double even for f32 so the CPU and the GPU round the same value.
      for (int pair = 0; pair < (sizeof(T) == 4 ? 2 : 1); ++pair) {
        const double r = std::sqrt(-2.0 * std::log(u[2 * pair]));
        const double theta = 2.0 * std::numbers::pi * u[2 * pair + 1];
        v[2 * pair] = std::fma(stddev * r, std::cos(theta), mean);  // fma: as in the uniforms
        v[2 * pair + 1] = std::fma(stddev * r, std::sin(theta), mean);
      }
    });
  });
}

namespace {
uint32_t stream_word(const RandomStream& rs, int64_t i) {
  return philox::random_block(rs.seed, rs.stream, rs.first_block + static_cast<uint64_t>(i / 4)).v[i % 4];
}
}  // namespace

void CpuBackend::dropout(const Tensor& x, double p, RandomStream rs, Tensor& y, Tensor& mask) {
  cpu::dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    auto* bits = reinterpret_cast<uint32_t*>(mask.data<int64_t>());  // word i / 32, bit i % 32
    const uint32_t threshold = dropout_threshold(p);
    const T scale = static_cast<T>(1.0 / (1.0 - p));
    const int64_t n = x.numel();
    // Chunks of 1024 elements (256 blocks, 32 mask words): a chunk's words are generated in one batch.
    constexpr int64_t kChunk = 1024;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (int64_t start = 0; start < n; start += kChunk) {
      uint32_t words[kChunk];
      const int64_t len = std::min(kChunk, n - start);
      cpu::philox_words(rs.seed, rs.stream, rs.first_block + static_cast<uint64_t>(start / 4), (len + 3) / 4, words);
      const T* xs = in + start;
      T* ys = out + start;
      // A vector select (-fno-trapping-math, meson.build), not a branch that a random word
      // mispredicts about p of the time.
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) ys[j] = words[j] >= threshold ? xs[j] * scale : T(0);
      for (int64_t w = 0; w < (len + 31) / 32; ++w) {
        const int64_t count = std::min<int64_t>(32, len - 32 * w);
        uint32_t keep = 0;
#pragma omp simd reduction(| : keep)
        for (int64_t b = 0; b < count; ++b) keep |= static_cast<uint32_t>(words[32 * w + b] >= threshold) << b;
        bits[start / 32 + w] = keep;
      }
    }
  });
}

void CpuBackend::dropout_backward(const Tensor& dy, const Tensor& mask, double p, Tensor& dx) {
  cpu::dispatch(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g = dy.data<T>();
    T* out = dx.data<T>();
    const auto* bits = reinterpret_cast<const uint32_t*>(mask.data<int64_t>());
    const T scale = static_cast<T>(1.0 / (1.0 - p));  // as in the forward
    const int64_t n = dy.numel(), words = (n + 31) / 32;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (int64_t w = 0; w < words; ++w) {
      const uint32_t keep = bits[w];
      const int64_t first = 32 * w, count = std::min<int64_t>(32, n - first);
#pragma omp simd
      for (int64_t b = 0; b < count; ++b) out[first + b] = (keep >> b) & 1u ? g[first + b] * scale : T(0);
    }
  });
}

void CpuBackend::word_dropout(const Tensor& ids, double p, int64_t replacement, RandomStream rs,
                              Tensor& out) {
  const int64_t* in = ids.data<int64_t>();
  int64_t* o = out.data<int64_t>();
  const uint32_t threshold = dropout_threshold(p);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    o[i] = p < 1 && stream_word(rs, i) >= threshold ? in[i] : replacement;  // p = 1 drops every id
  }
}

}  // namespace qkgrad
