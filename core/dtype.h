// Element types and devices: the two small enums every tensor carries.
#pragma once

#include <cstddef>
#include <string_view>

namespace qkgrad {

// float32 for training, float64 for gradient checks.
enum class DType { f32, f64 };

constexpr std::size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 8; }
constexpr std::string_view dtype_name(DType t) { return t == DType::f32 ? "f32" : "f64"; }

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }

enum class Device { cpu, cuda };

constexpr std::string_view device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

}  // namespace qkgrad
