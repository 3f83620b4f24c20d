// Vectorisable exp and tanh for the float kernels on the host (softmax, cross-entropy,
// attention, and the elementwise functions of core/unary_functions.h: exp, σ, tanh, GELU, SiLU).
//
// std::exp on float is a call into libm that the compiler cannot vectorise without
// -ffast-math (which qkgrad never uses globally). exp_fast computes e^x as 2^n · e^r with
// n = round(x / ln 2) and r = x − n·ln 2 in [−ln2/2, ln2/2], e^r from a degree-6 polynomial
// (Taylor coefficients; the remainder is below 2^-24 on that interval), and 2^n assembled in
// the exponent bits: plain arithmetic the compiler turns into vector instructions (given
// -fno-trapping-math, meson.build, which lets it turn the limits' ifs into selects). Relative
// error below 3e-7, about 2 ulp (tests/test_random.cpp compares it with std::exp). NaN stays
// NaN, −∞ and anything below −87.3 give 0, anything above 88.7 gives +∞. Doubles use std::exp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace qkgrad {

inline float exp_fast(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;    // ln 2 split in two for an exact n·ln2_hi
  constexpr float kLn2Lo = 1.42860682030941723e-6f;
  // NaN takes the lower bound (a NaN cast to int below would be undefined); the result is NaN.
  const float clamped = x >= -87.3f ? (x > 88.7f ? 88.7f : x) : -87.3f;
  const float n = std::nearbyint(clamped * kLog2e);
  const float r = (clamped - n * kLn2Hi) - n * kLn2Lo;
  // e^r = 1 + r + r²/2! + … + r⁶/6!, evaluated with Horner's rule.
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n as a float
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  float result = p * scale;
  if (x < -87.3f) result = 0.0f;
  if (x > 88.7f) result = std::numeric_limits<float>::infinity();
  if (x != x) result = x;  // NaN
  return result;
}

inline double exp_fast(double x) { return std::exp(x); }

// tanh x for float, as plain arithmetic that vectorises (glibc's tanhf is a call per element,
// and it was the largest cost of a GELU language model's step). Two formulas, both computed and
// one selected (a branch would stop the vectoriser):
//   |x| < 0.55: the odd Taylor series x − x³/3 + 2x⁵/15 − 17x⁷/315 + … to x¹⁷; the first term
//               left out, 443861162/1856156927625·x¹⁹, is below 3e-9 there (tanh 0.55 = 0.50).
//   beyond:     1 − 2/(e^{2|x|} + 1) with exp_fast (no cancellation: the result is above 0.5),
//               the sign put back; e^{2|x|} = ∞ past |x| = 44 gives exactly ±1.
// Relative error below 5e-7 (a few ulp; tests/test_random.cpp compares it with std::tanh).
// NaN stays NaN, ±∞ gives ±1, and tanh(−x) = −tanh(x) exactly.
inline float tanh_fast(float x) {
  const float a = std::fabs(x);
  const float z = a * a;
  float p = 6404582.0f / 10854718875.0f;  // the Taylor coefficients of x¹⁷ down to x³
  p = p * z - 929569.0f / 638512875.0f;
  p = p * z + 21844.0f / 6081075.0f;
  p = p * z - 1382.0f / 155925.0f;
  p = p * z + 62.0f / 2835.0f;
  p = p * z - 17.0f / 315.0f;
  p = p * z + 2.0f / 15.0f;
  p = p * z - 1.0f / 3.0f;
  const float series = a + a * z * p;
  const float far = 1.0f - 2.0f / (exp_fast(2.0f * a) + 1.0f);
  const float magnitude = a < 0.55f ? series : far;  // NaN: far, which is NaN
  return std::copysign(magnitude, x);
}

inline double tanh_fast(double x) { return std::tanh(x); }

}  // namespace qkgrad
