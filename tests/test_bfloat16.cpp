// bfloat16 (core/bfloat16.h): rounding, special values, the dtype in tensors, printing,
// safetensors, and the cast's backward.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <unistd.h>

#include "core/autograd.h"
#include "core/bfloat16.h"
#include "core/error.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "ops/ops.h"

using namespace qkgrad;
using Catch::Matchers::Contains;

namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint16_t bf16_bits(float f) { return bfloat16(f).bits; }

}  // namespace

TEST_CASE("bfloat16: the top 16 bits of a float, rounded to nearest with ties to even", "[bf16]") {
  // Exact values keep their bits: 1 = 0x3F80, -2 = 0xC000, 0.5 = 0x3F00.
  CHECK(bf16_bits(1.0f) == 0x3F80);
  CHECK(bf16_bits(-2.0f) == 0xC000);
  CHECK(bf16_bits(0.5f) == 0x3F00);
  CHECK(static_cast<float>(bfloat16(3.0f)) == 3.0f);
  // 1 + 2^-8 lies halfway between 1 (0x3F80, even) and 1 + 2^-7 (0x3F81): to the even one.
  CHECK(bf16_bits(from_bits(0x3F808000u)) == 0x3F80);
  // 1 + 3·2^-8 lies halfway between 0x3F81 (odd) and 0x3F82 (even): up to the even one.
  CHECK(bf16_bits(from_bits(0x3F818000u)) == 0x3F82);
  // Just above or below halfway: to the nearest.
  CHECK(bf16_bits(from_bits(0x3F808001u)) == 0x3F81);
  CHECK(bf16_bits(from_bits(0x3F807FFFu)) == 0x3F80);
  // The relative spacing is 2^-8 at most: every float in [1, 2) lands within 2^-8 of itself.
  for (float x = 1.0f; x < 2.0f; x += 0.001953f) {
    CHECK(std::fabs(static_cast<float>(bfloat16(x)) - x) <= std::ldexp(1.0f, -8));
  }
  // Special values: infinities stay, a NaN stays a NaN (sign kept), -0 stays -0.
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(static_cast<float>(bfloat16(inf)) == inf);
  CHECK(static_cast<float>(bfloat16(-inf)) == -inf);
  CHECK(std::isnan(static_cast<float>(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(static_cast<float>(bfloat16(from_bits(0x7F800001u)))));  // a NaN whose top bits look like inf
  CHECK(std::isnan(static_cast<float>(bfloat16(from_bits(0xFF800001u)))));
  CHECK(bf16_bits(-0.0f) == 0x8000);
  // Past the largest bf16 (0x7F7F = 3.3895e38), rounding goes to infinity; float's max does.
  CHECK(static_cast<float>(bfloat16(std::numeric_limits<float>::max())) == inf);
  CHECK(static_cast<float>(bfloat16(from_bits(0x7F7F0000u))) == from_bits(0x7F7F0000u));
  // Subnormals round like everything else (float's range is bf16's).
  CHECK(bf16_bits(from_bits(0x00010000u)) == 0x0001);
  CHECK(bf16_bits(from_bits(0x00008000u)) == 0x0000);  // a tie: to even (0)
}

TEST_CASE("bfloat16 tensors: conversion, element access, printing; ops refuse to compute in it", "[bf16]") {
  const Tensor x = Tensor::from_vector({1.0, 1.00390625, -3.14159, 1e30, 0.0}, {5}, DType::f64);
  const Tensor b = x.to(DType::bf16);
  CHECK(b.dtype() == DType::bf16);
  CHECK(b.nbytes() == 10);
  const std::vector<double> back = b.to_vector();
  CHECK(back[0] == 1.0);
  CHECK(back[1] == 1.0);  // 1 + 2^-8: a tie, to even
  CHECK(back[2] == static_cast<double>(static_cast<float>(bfloat16(-3.14159f))));
  CHECK(back[2] == -3.140625);
  CHECK(std::fabs(back[3] - 1e30) / 1e30 < 1.0 / 256);
  CHECK(b.at({2}) == -3.140625);
  Tensor c = b.clone();
  c.set({0}, 2.5);
  CHECK(c.at({0}) == 2.5);
  CHECK(b.to(DType::f32).to(DType::bf16).to_vector() == back);  // exact up and down
  CHECK(Tensor::full({2}, 0.1, DType::bf16).to_vector() == std::vector<double>{0.10009765625, 0.10009765625});
  CHECK(Tensor::from_ids({3, -7}, {2}).to(DType::bf16).to_vector() == std::vector<double>{3.0, -7.0});
  CHECK_THAT(b.str(), Contains("bf16, cpu") && Contains("-3.14062"));
  // Computing ops refuse bf16 with what to do.
  CHECK_THROWS_WITH(exp(b), Contains("bf16") && Contains(".to(DType::f32)"));
  CHECK_THROWS_AS(b + b, Error);
  // A bf16 leaf cannot require grad: master weights stay float32.
  Tensor leaf = Tensor::zeros({2}, DType::bf16);
  CHECK_THROWS_AS(leaf.requires_grad_(), Error);
}

TEST_CASE("bfloat16: safetensors BF16 round trip", "[bf16]") {
  const std::string path = std::filesystem::temp_directory_path() / ("qkgrad-bf16-" + std::to_string(::getpid()) + ".safetensors");
  const Tensor b = Tensor::from_vector({1.5, -2.25, 1e-3, 65504.0}, {2, 2}, DType::f64).to(DType::bf16);
  safetensors::save(path, {{"w", b}});
  const safetensors::Contents read = safetensors::load(path);
  std::filesystem::remove(path);
  REQUIRE(read.tensors.size() == 1);
  CHECK(read.tensors[0].second.dtype() == DType::bf16);
  CHECK(read.tensors[0].second.shape() == Shape{2, 2});
  CHECK(read.tensors[0].second.to_vector() == b.to_vector());
}

TEST_CASE("bfloat16: the cast's backward is the identity (converted back to the input's dtype)", "[bf16]") {
  // f32 -> bf16 -> f32, then a weighted sum: d/dx = w exactly when w is a bf16 value (the
  // gradient of the bf16 tensor is a bf16 tensor, as in PyTorch).
  Tensor x = Tensor::from_vector({0.3, -1.7, 2.9}, {3}, DType::f32).requires_grad_();
  const Tensor w = Tensor::from_vector({0.5, -1.25, 3.0}, {3}, DType::f32);
  const Tensor y = to_dtype(to_dtype(x, DType::bf16), DType::f32);
  sum(y * w).backward();
  CHECK(x.grad().dtype() == DType::f32);
  CHECK(x.grad().to_vector() == w.to_vector());
}
