// Small helpers shared by the CPU kernels.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace qkgrad::cpu {

// Calls fn(T{}) with T = float or double according to dtype: write a kernel once as a
// generic lambda, `dispatch(t.dtype(), [&](auto tag) { using T = decltype(tag); ... });`.
// Ops reject i64 before any math kernel sees it; reaching one here is an internal error.
template <typename Fn>
void dispatch(DType dtype, Fn&& fn) {
  if (dtype == DType::f32) {
    fn(float{});
  } else if (dtype == DType::f64) {
    fn(double{});
  } else {
    fail("internal error: a floating-point cpu kernel was called on an i64 tensor");
  }
}

// Like dispatch, for the few kernels that also move integers (fill, copy/convert).
template <typename Fn>
void dispatch_all(DType dtype, Fn&& fn) {
  if (dtype == DType::i64) {
    fn(int64_t{});
  } else {
    dispatch(dtype, fn);
  }
}

template <typename T>
const T* in_ptr(const Tensor& t) {
  return t.data<T>();
}

// Strides of `in` when broadcast to the shape `out` (NumPy rules, aligned from the right):
// a broadcast dimension gets stride 0. Returned for out.rank() dimensions.
struct BroadcastStrides {
  int64_t stride[5] = {0, 0, 0, 0, 0};
};
inline BroadcastStrides broadcast_strides(const Shape& in, const Shape& out) {
  BroadcastStrides s;
  const auto in_strides = in.strides();
  const int shift = out.rank() - in.rank();
  for (int axis = 0; axis < out.rank(); ++axis) {
    const int in_axis = axis - shift;
    if (in_axis >= 0 && in[in_axis] != 1) s.stride[axis] = in_strides[static_cast<std::size_t>(in_axis)];
  }
  return s;
}

}  // namespace qkgrad::cpu
