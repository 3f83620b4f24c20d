// Element types and devices: the two small enums every tensor carries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace qkgrad {

// float32 for training, float64 for gradient checks, int64 for indices (token ids, gather
// indices). Every differentiable op takes f32/f64; i64 tensors carry indices and are never
// differentiated.
enum class DType { f32, f64, i64 };

constexpr std::size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 8; }
constexpr std::string_view dtype_name(DType t) {
  return t == DType::f32 ? "f32" : t == DType::f64 ? "f64" : "i64";
}
constexpr bool is_floating(DType t) { return t != DType::i64; }

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }

enum class Device { cpu, cuda };

constexpr std::string_view device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

}  // namespace qkgrad
