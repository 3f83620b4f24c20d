// Writing a kernel once for float and double: dispatch(dtype, fn) calls fn(T{}) with T = float
// or double according to dtype, so a kernel is a generic lambda:
//   dispatch(t.dtype(), [&](auto tag) { using T = decltype(tag); ... });
// Shared by the CPU and CUDA backends (backends/cpu/cpu_common.h, backends/cuda/cuda_common.cuh).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace qkgrad::kernels {

// Ops reject i64 before any math kernel sees it; reaching one here is an internal error.
template <typename Fn>
void dispatch(DType dtype, Fn&& fn) {
  if (dtype == DType::f32) {
    fn(float{});
  } else if (dtype == DType::f64) {
    fn(double{});
  } else {
    fail(cat("internal error: a floating-point kernel was called on an ", dtype_name(dtype), " tensor"));
  }
}

// Like dispatch, for the few kernels that also move integers and bfloat16 (fill, copy/convert).
template <typename Fn>
void dispatch_all(DType dtype, Fn&& fn) {
  if (dtype == DType::i64) {
    fn(int64_t{});
  } else if (dtype == DType::bf16) {
    fn(bfloat16{});
  } else {
    dispatch(dtype, fn);
  }
}

}  // namespace qkgrad::kernels
