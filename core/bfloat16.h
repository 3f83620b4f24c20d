// bfloat16: the upper half of a float32. 1 sign bit, float32's 8 exponent bits (so its range,
// about 1e-38 to 3e38: no loss scaling is needed, unlike float16's 5 bits), and 7 of its 23
// mantissa bits (about 2-3 significant decimal digits: relative spacing 2^-8 = 0.39%).
//
//   float32  s eeeeeeee mmmmmmmmmmmmmmmmmmmmmmm
//   bfloat16 s eeeeeeee mmmmmmm                  = the float's top 16 bits, rounded
//
// Converting up (bf16 -> f32) is exact: shift the bits back. Converting down rounds to the
// nearest bf16, ties to the one with an even last bit (IEEE's default, what oneDNN, PyTorch and
// CUDA's __float2bfloat16 do): add 0x7FFF plus the lowest kept bit, then drop the low 16 bits.
// A NaN stays a NaN (quiet, sign kept); infinities stay infinities; a value past the largest
// bf16 (3.3895e38) rounds to infinity, as in float arithmetic.
//
// One definition for the CPU and the CUDA kernels (QKGRAD_HOST_DEVICE). Arithmetic is never
// done in bf16: values are converted to float first (mixed precision keeps the math in float32).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace qkgrad {

struct bfloat16 {
  uint16_t bits = 0;

  bfloat16() = default;
  QKGRAD_HOST_DEVICE explicit bfloat16(float x) : bits(round_to_bf16(x)) {}
  QKGRAD_HOST_DEVICE explicit bfloat16(double x) : bfloat16(static_cast<float>(x)) {}
  QKGRAD_HOST_DEVICE explicit bfloat16(int64_t x) : bfloat16(static_cast<float>(x)) {}
  QKGRAD_HOST_DEVICE explicit operator float() const { return to_float(bits); }
  QKGRAD_HOST_DEVICE explicit operator double() const { return to_float(bits); }
  QKGRAD_HOST_DEVICE explicit operator int64_t() const { return static_cast<int64_t>(to_float(bits)); }

  QKGRAD_HOST_DEVICE static float to_float(uint16_t b) {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  QKGRAD_HOST_DEVICE static uint16_t round_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0) {
      return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN: keep it a (quiet) NaN
    }
    const uint32_t lowest_kept = (u >> 16) & 1u;  // ties go to the even one
    return static_cast<uint16_t>((u + 0x7FFFu + lowest_kept) >> 16);
  }
};

static_assert(sizeof(bfloat16) == 2, "bfloat16 is two bytes");

}  // namespace qkgrad
