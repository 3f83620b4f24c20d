// The two loop shapes behind every elementwise CPU kernel.
#pragma once

#include <array>
#include <cstdint>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_common.h"

namespace qkgrad::cpu {

// out[i] = f(i) for i < n, split into equal static chunks over the threads and vectorised.
template <typename T, typename F>
void map_index(T* out, int64_t n, F f) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) out[i] = f(i);
}

// out = f(v) where v[k] is input k's element, every input broadcast (NumPy rules) to
// out_shape. Equal shapes take a flat loop; otherwise rows of the last dimension are the unit
// of work, and inside a row each input advances with stride 1, or 0 where it is broadcast.
template <typename T, std::size_t N, typename F>
void broadcast_apply(const std::array<const T*, N>& in, const std::array<const Shape*, N>& shapes,
                     T* out, const Shape& out_shape, F f) {
  const int64_t n = out_shape.numel();
  bool same = true;
  for (const Shape* s : shapes) same = same && *s == out_shape;
  if (same) {
    map_index(out, n, [&](int64_t i) {
      std::array<T, N> v;
      for (std::size_t k = 0; k < N; ++k) v[k] = in[k][i];
      return f(v);
    });
    return;
  }
  const int rank = out_shape.rank();  // >= 1 here: rank-0 shapes are all equal
  std::array<BroadcastStrides, N> strides;
  for (std::size_t k = 0; k < N; ++k) strides[k] = broadcast_strides(*shapes[k], out_shape);
  const int64_t inner = out_shape[rank - 1];
  const int64_t rows = inner == 0 ? 0 : n / inner;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t row = 0; row < rows; ++row) {
    std::array<int64_t, N> offset{};
    int64_t rest = row;
    for (int axis = rank - 2; axis >= 0; --axis) {
      const int64_t coord = rest % out_shape[axis];
      rest /= out_shape[axis];
      for (std::size_t k = 0; k < N; ++k) offset[k] += coord * strides[k].stride[axis];
    }
    T* out_row = out + row * inner;
    for (int64_t j = 0; j < inner; ++j) {
      std::array<T, N> v;
      for (std::size_t k = 0; k < N; ++k) v[k] = in[k][offset[k] + j * strides[k].stride[rank - 1]];
      out_row[j] = f(v);
    }
  }
}

}  // namespace qkgrad::cpu
