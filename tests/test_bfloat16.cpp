// bfloat16 (core/bfloat16.h): rounding, special values, the dtype in tensors, printing,
// safetensors, and the cast's backward.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/bfloat16.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "ops/ops.h"
#include "ops/precision.h"

using namespace qkgrad;
using Catch::Matchers::Contains;

namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint16_t bf16_bits(float f) { return bfloat16(f).bits; }

// The definition as a plain scalar function: a tensor's conversion runs round_to_bf16 in a loop
// the compiler vectorises (if-converting its NaN test), and must give the same bits for every float.
uint16_t reference_bf16(uint32_t u) {
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

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

TEST_CASE("bfloat16: a tensor's conversion (a vectorised loop) gives the definition's bits", "[bf16]") {
  // Every top half with low halves 0, 1, 0x7FFF, 0x8000 (the ties), 0x8001 and 0xFFFF (every NaN
  // and infinity among them), and a stride through all 2^32 patterns that varies the low bits.
  std::vector<uint32_t> patterns;
  for (uint32_t top = 0; top <= 0xFFFFu; ++top) {
    for (uint32_t low : {0x0u, 0x1u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) patterns.push_back(top << 16 | low);
  }
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 40'009) patterns.push_back(static_cast<uint32_t>(u));
  const Tensor x = Tensor::empty({static_cast<int64_t>(patterns.size())}, DType::f32);  // the bits as they are
  std::memcpy(x.raw_data(), patterns.data(), patterns.size() * sizeof(uint32_t));
  const Tensor b = x.to(DType::bf16);
  const auto* bits = static_cast<const uint16_t*>(b.raw_data());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < patterns.size(); ++i) wrong += bits[i] != reference_bf16(patterns[i]);
  CHECK(wrong == 0);
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

namespace {

// x rounded to bf16 and back, as f64.
Tensor bf16_values(const Tensor& x) { return x.detach().to(DType::bf16).to(DType::f64); }

double max_abs_diff(const Tensor& x, const Tensor& y) {
  const std::vector<double> a = x.to_vector(), b = y.to_vector();
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

}  // namespace

TEST_CASE("matmul_bf16: the product of the bf16-rounded operands in f32; its backward rounds dC once and writes f32 "
          "gradients", "[bf16]") {
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {{{6, 5}, {5, 7}, false, false},
                        {{5, 6}, {7, 5}, true, true},
                        {{2, 3, 4}, {6, 4}, false, true},  // b shared by the batch
                        {{2, 4, 3}, {2, 4, 5}, true, false}};
  Generator gen(5);
  for (const Case& c : cases) {
    INFO("a " << c.a << (c.ta ? "ᵀ" : "") << ", b " << c.b << (c.tb ? "ᵀ" : ""));
    Tensor a = Tensor::randn(c.a, gen).requires_grad_();
    Tensor b = Tensor::randn(c.b, gen).requires_grad_();
    const Tensor y = matmul_bf16(a, b, c.ta, c.tb);
    CHECK(y.dtype() == DType::f32);
    const Tensor w = Tensor::randn(y.shape(), gen);
    sum(y * w).backward();
    CHECK(a.grad().dtype() == DType::f32);
    CHECK(b.grad().dtype() == DType::f32);
    // The reference in f64: plain matmul and its backward on the rounded values.
    Tensor a64 = bf16_values(a).requires_grad_(), b64 = bf16_values(b).requires_grad_();
    const Tensor y64 = matmul(a64, b64, c.ta, c.tb);
    sum(y64 * bf16_values(w)).backward();
    const int64_t k = c.ta ? c.a[c.a.rank() - 2] : c.a[c.a.rank() - 1];
    const double tol = 1e-6 * static_cast<double>(k) * 16;  // f32 sums of exact products (|x| < ~4)
    CHECK(max_abs_diff(y, y64) <= tol);
    CHECK(max_abs_diff(a.grad(), a64.grad()) <= tol * 8);
    CHECK(max_abs_diff(b.grad(), b64.grad()) <= tol * 8);
  }
  // The derivative a difference quotient sees: a step of 0.5 on one entry of a, through the
  // bf16 rounding (spacing <= 2^-6 below 4), matches dA within that rounding.
  Tensor a = Tensor::randn({3, 4}, gen).requires_grad_();
  const Tensor b = Tensor::randn({4, 2}, gen), w = Tensor::randn({3, 2}, gen);
  sum(matmul_bf16(a, b) * w).backward();
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      NoGradGuard no_grad;
      Tensor plus = a.detach().clone(), minus = a.detach().clone();
      plus.set({i, j}, a.at({i, j}) + 0.5);
      minus.set({i, j}, a.at({i, j}) - 0.5);
      const double numeric = (sum(matmul_bf16(plus, b) * w).item() - sum(matmul_bf16(minus, b) * w).item()) / 1.0;
      CHECK(numeric == Approx(a.grad().at({i, j})).margin(0.15));
    }
  }
  // What it refuses: f64 inputs (mixed precision is f32 master values).
  CHECK_THROWS_WITH(matmul_bf16(Tensor::zeros({2, 2}, DType::f64), Tensor::zeros({2, 2}, DType::f64)),
                    Contains("mixed precision takes f32 inputs"));
}

TEST_CASE("linear under MixedPrecision(bf16) is matmul_bf16 plus the bias (fused vs composed); outside it, f32", "[bf16]") {
  Generator gen(8);
  const Tensor x0 = Tensor::randn({2, 5, 6}, gen), w0 = Tensor::randn({4, 6}, gen), b0 = Tensor::randn({4}, gen);
  const Tensor up = Tensor::randn({2, 5, 4}, gen);
  auto run = [&](bool fused, bool mixed) {
    Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    Tensor y;
    if (fused) {
      std::optional<MixedPrecision> guard;
      if (mixed) guard.emplace(Precision::bf16);
      y = linear(x, w, b);
    } else {
      y = matmul_bf16(x, w, false, true) + b;
    }
    sum(y * up).backward();  // after the guard: the backward keeps the forward's precision
    return std::vector<Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
  };
  const auto fused = run(true, true), composed = run(false, false), plain = run(true, false);
  for (std::size_t i = 0; i < fused.size(); ++i) {
    INFO("output " << i);
    CHECK(fused[i].dtype() == DType::f32);
    CHECK(max_abs_diff(fused[i], composed[i]) <= 1e-4);
  }
  // Rounding shows: the f32 linear differs from the mixed one by about 2^-8 relative.
  CHECK(max_abs_diff(plain[0], fused[0]) > 1e-4);
  CHECK(max_abs_diff(plain[0], fused[0]) < 0.2);
  CHECK(linear_precision() == Precision::f32);  // the guard restored it
  CHECK(parse_precision("bf16") == Precision::bf16);
  CHECK_THROWS_WITH(parse_precision("fp16"), Contains("precision must be f32 or bf16, got 'fp16'"));
}

TEST_CASE("mixed precision saves no bf16 copy: after the forward the tape holds what it holds in f32", "[bf16]") {
  Generator gen(9);
  const Tensor x0 = Tensor::randn({64, 96}, gen);  // [N, in]
  const Tensor w1_0 = Tensor::randn({128, 96}, gen), b1_0 = Tensor::randn({128}, gen);  // [out, in], [out]
  const Tensor w2_0 = Tensor::randn({16, 128}, gen);                                    // [out, in]
  Backend& cpu = backend(Device::cpu);
  auto held = [&](Precision precision) {  // bytes the tape holds after the forward
    const Tensor x = x0.clone().requires_grad_();  // fresh leaves: both runs allocate their gradients
    const Tensor w1 = w1_0.clone().requires_grad_(), b1 = b1_0.clone().requires_grad_();
    const Tensor w2 = w2_0.clone().requires_grad_();
    // The cache may hand out a block up to twice the size asked for: start with none, and sizes
    // such that no later tensor fits a freed bf16 copy's block (the smallest copy, 12 KiB, is
    // more than twice y's 4 KiB), so the count is the tensors' own sizes.
    cpu.release_cached_memory();
    const std::size_t start = cpu.allocator_stats().bytes_in_use;
    Tensor loss;
    {
      const MixedPrecision guard(precision);
      loss = sum(linear(relu(linear(x, w1, b1)), w2));  // [64, 128] → y [64, 16] → []
    }
    const std::size_t bytes = cpu.allocator_stats().bytes_in_use - start;
    loss.backward();
    CHECK(max_abs_diff(w2.grad(), Tensor::zeros({16, 128})) > 0);
    return bytes;
  };
  // The backward's transient copies (one product's operands at a time) are what bf16 adds; the
  // step's peak against float32's is measured by qkgrad-bench (docs/autodiff.md).
  CHECK(held(Precision::bf16) == held(Precision::f32));
  // bf16_operand rounds to nearest even, records nothing, and keeps nothing of its own.
  const Tensor w = w1_0.clone().requires_grad_();
  const Tensor r = bf16_operand(w);
  CHECK(r.dtype() == DType::bf16);
  CHECK(!r.requires_grad());
  CHECK(max_abs_diff(r.to(DType::f32), w1_0) <= 0.01 * 4);
}
