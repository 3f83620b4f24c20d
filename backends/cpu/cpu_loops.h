// The two loop shapes behind every elementwise CPU kernel.
#pragma once

#include <array>
#include <cstdint>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_common.h"

namespace qkgrad::cpu {

// out[i] = f(i) for i < n, split into equal static chunks over the threads and vectorised.
// Each thread calls its own copy of f, and f must capture by value: the compiler can then keep
// the captured pointers in registers. Through a shared or by-reference closure it must assume a
// store to out[i] might change them and re-reads them per lane (AVX-512 gathers, ~3× slower).
template <typename T, typename F>
void map_index(T* out, int64_t n, const F& f) {
#pragma omp parallel if (n >= kParallelGrain)
  {
    const F local = f;
#pragma omp for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = local(i);
  }
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
    map_index(out, n, [in, f](int64_t i) {
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
  bool unit_steps = true;  // no input broadcast along the last axis
  for (std::size_t k = 0; k < N; ++k) unit_steps = unit_steps && strides[k].stride[rank - 1] == 1;
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
    std::array<const T*, N> row_in;  // this row's start in each input; steps: 1, or 0 if broadcast
    std::array<int64_t, N> step;
    for (std::size_t k = 0; k < N; ++k) {
      row_in[k] = in[k] + offset[k];
      step[k] = strides[k].stride[rank - 1];
    }
    if (unit_steps) {  // the common case (a bias added to every row): contiguous, vectorised
#pragma omp simd
      for (int64_t j = 0; j < inner; ++j) {
        std::array<T, N> v;
        for (std::size_t k = 0; k < N; ++k) v[k] = row_in[k][j];
        out_row[j] = f(v);
      }
    } else {
      for (int64_t j = 0; j < inner; ++j) {
        std::array<T, N> v;
        for (std::size_t k = 0; k < N; ++k) v[k] = row_in[k][j * step[k]];
        out_row[j] = f(v);
      }
    }
  }
}

}  // namespace qkgrad::cpu
