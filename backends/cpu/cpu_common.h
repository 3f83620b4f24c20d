// Small helpers shared by the CPU kernels.
#pragma once

#include <cstdint>

#include "backends/dtype_dispatch.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace qkgrad::cpu {

using kernels::dispatch;      // backends/dtype_dispatch.h
using kernels::dispatch_all;

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
