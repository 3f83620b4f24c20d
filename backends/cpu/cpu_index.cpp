// Data movement: permutes, block copies (concat, slice, pad), and indexed reads and their
// scatter-add backwards. The scatters never race: threads own disjoint output columns, and each
// adds its contributions in index order, so results are deterministic.
#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_common.h"

namespace qkgrad {

using cpu::dispatch;

namespace {
// Column slices for the scatters: enough for all threads, long enough for the vector units.
constexpr int64_t kColumnSlice = 64;
}  // namespace

void CpuBackend::permute(const Tensor& x, const std::vector<int>& perm, Tensor& out) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    const Shape& os = out.shape();
    const int rank = os.rank();
    if (rank == 0 || out.numel() == 0) {
      if (out.numel() == 1) o[0] = in[0];
      return;
    }
    // The input stride of each output axis.
    const auto x_strides = x.shape().strides();
    int64_t stride[Shape::kMaxRank];
    for (int i = 0; i < rank; ++i) stride[i] = x_strides[perm[static_cast<std::size_t>(i)]];
    const int64_t inner = os[rank - 1], rows = out.numel() / inner, step = stride[rank - 1];
#pragma omp parallel for schedule(static) if (out.numel() >= kParallelGrain)
    for (int64_t row = 0; row < rows; ++row) {
      int64_t offset = 0, rest = row;
      for (int axis = rank - 2; axis >= 0; --axis) {
        offset += (rest % os[axis]) * stride[axis];
        rest /= os[axis];
      }
      T* dst = o + row * inner;
      for (int64_t j = 0; j < inner; ++j) dst[j] = in[offset + j * step];
    }
  });
}

void CpuBackend::copy_block(const Tensor& src, int64_t src_n, int64_t src_start, Tensor& dst,
                            int64_t dst_n, int64_t dst_start, int64_t outer, int64_t len,
                            int64_t inner, bool accumulate) {
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* s = src.data<T>();
    T* d = dst.data<T>();
    const int64_t run = len * inner;  // contiguous elements per outer index
#pragma omp parallel for schedule(static) if (outer * run >= kParallelGrain)
    for (int64_t o = 0; o < outer; ++o) {
      const T* from = s + (o * src_n + src_start) * inner;
      T* to = d + (o * dst_n + dst_start) * inner;
      if (accumulate) {
#pragma omp simd
        for (int64_t i = 0; i < run; ++i) to[i] += from[i];
      } else if (run > 0) {
        std::memcpy(to, from, static_cast<std::size_t>(run) * sizeof(T));
      }
    }
  });
}

void CpuBackend::index_select(const Tensor& x, const Tensor& ids, int64_t outer, int64_t n,
                              int64_t inner, Tensor& out) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    const int64_t* id = ids.data<int64_t>();
    T* o = out.data<T>();
    const int64_t k = ids.numel();
#pragma omp parallel for schedule(static) if (outer * k * inner >= kParallelGrain)
    for (int64_t row = 0; row < outer * k; ++row) {
      const int64_t oi = row / k, j = row % k;
      std::memcpy(o + row * inner, in + (oi * n + id[j]) * inner, static_cast<std::size_t>(inner) * sizeof(T));
    }
  });
}

void CpuBackend::index_select_prefix(const Tensor& x, const Tensor& ids, int64_t used, Tensor& out) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    const int64_t* id = ids.data<int64_t>();
    T* o = out.data<T>();
    const int64_t k = ids.numel(), in_width = x.numel() / std::max<int64_t>(x.size(0), 1);
    const int64_t out_width = out.numel() / std::max<int64_t>(k, 1);
#pragma omp parallel for schedule(static) if (k * used >= kParallelGrain)
    for (int64_t j = 0; j < k; ++j) {
      std::memcpy(o + j * out_width, in + id[j] * in_width, static_cast<std::size_t>(used) * sizeof(T));
    }
  });
}

void CpuBackend::index_add(const Tensor& dy, const Tensor& ids, int64_t outer, int64_t n,
                           int64_t inner, Tensor& dx) {
  dispatch(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g = dy.data<T>();
    const int64_t* id = ids.data<int64_t>();
    T* d = dx.data<T>();
    const int64_t k = ids.numel();
    const int64_t slices = (inner + kColumnSlice - 1) / kColumnSlice;
#pragma omp parallel for schedule(static) if (outer * k * inner >= kParallelGrain)
    for (int64_t item = 0; item < outer * slices; ++item) {
      const int64_t oi = item / slices;
      const int64_t begin = (item % slices) * kColumnSlice, end = std::min(inner, begin + kColumnSlice);
      for (int64_t j = 0; j < k; ++j) {
        const T* from = g + (oi * k + j) * inner;
        T* to = d + (oi * n + id[j]) * inner;
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) to[i] += from[i];
      }
    }
  });
}

void CpuBackend::gather(const Tensor& x, const Tensor& index, int64_t outer, int64_t n, int64_t k,
                        int64_t inner, Tensor& out) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    const int64_t* idx = index.data<int64_t>();
    T* o = out.data<T>();
#pragma omp parallel for schedule(static) if (outer * k * inner >= kParallelGrain)
    for (int64_t row = 0; row < outer * k; ++row) {
      const int64_t oi = row / k;
      for (int64_t i = 0; i < inner; ++i) o[row * inner + i] = in[(oi * n + idx[row * inner + i]) * inner + i];
    }
  });
}

void CpuBackend::scatter_add(const Tensor& dy, const Tensor& index, int64_t outer, int64_t n,
                             int64_t k, int64_t inner, Tensor& dx) {
  dispatch(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g = dy.data<T>();
    const int64_t* idx = index.data<int64_t>();
    T* d = dx.data<T>();
    // Each (outer, column) pair is owned by one thread, which adds its k values in order.
#pragma omp parallel for schedule(static) if (outer * k * inner >= kParallelGrain)
    for (int64_t item = 0; item < outer * inner; ++item) {
      const int64_t oi = item / inner, i = item % inner;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t at = (oi * k + j) * inner + i;
        d[(oi * n + idx[at]) * inner + i] += g[at];
      }
    }
  });
}

}  // namespace qkgrad
