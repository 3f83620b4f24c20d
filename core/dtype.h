// Element types and devices: the two small enums every tensor carries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/bfloat16.h"

namespace qkgrad {

// float32 for training, float64 for gradient checks, int64 for indices (token ids, gather
// indices), bfloat16 (core/bfloat16.h) for the operands of mixed-precision matrix products.
// Every differentiable op computes in f32/f64; i64 tensors carry indices and are never
// differentiated; bf16 tensors are made by to_dtype and only stored, converted and (in mixed
// precision) multiplied.
enum class DType { f32, f64, i64, bf16 };

constexpr std::size_t dtype_size(DType t) { return t == DType::f32 ? 4 : t == DType::bf16 ? 2 : 8; }
constexpr std::string_view dtype_name(DType t) {
  return t == DType::f32 ? "f32" : t == DType::f64 ? "f64" : t == DType::bf16 ? "bf16" : "i64";
}
// The dtypes ops compute in: f32 and f64.
constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f64; }

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<bfloat16>() { return DType::bf16; }

enum class Device { cpu, cuda };

constexpr std::string_view device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

}  // namespace qkgrad
