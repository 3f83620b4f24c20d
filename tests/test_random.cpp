// Philox known answers, the reproducibility of random tensors, and their statistics.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/fast_math.h"
#include "backends/cpu/cpu_philox.h"
#include "core/backend.h"
#include "core/philox.h"
#include "core/tensor.h"

using namespace qkgrad;

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors", "[random]") {
  // From Random123's kat_vectors: counter, key -> output.
  const philox::Block zeros = philox::philox4x32_10({{0, 0, 0, 0}}, 0, 0);
  CHECK(zeros.v[0] == 0x6627e8d5u);
  CHECK(zeros.v[1] == 0xe169c58du);
  CHECK(zeros.v[2] == 0xbc57ac4cu);
  CHECK(zeros.v[3] == 0x9b00dbd8u);
  const philox::Block ones = philox::philox4x32_10({{~0u, ~0u, ~0u, ~0u}}, ~0u, ~0u);
  CHECK(ones.v[0] == 0x408f276du);
  CHECK(ones.v[1] == 0x41c83b0eu);
  CHECK(ones.v[2] == 0xa20bc7c6u);
  CHECK(ones.v[3] == 0x6d5451fdu);
  const philox::Block pi = philox::philox4x32_10({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
                                                 0xa4093822u, 0x299f31d0u);
  CHECK(pi.v[0] == 0xd16cfe09u);
  CHECK(pi.v[1] == 0x94fdccebu);
  CHECK(pi.v[2] == 0x5001e420u);
  CHECK(pi.v[3] == 0x24126ea1u);
}

TEST_CASE("random tensors are reproducible from the seed and advance the generator", "[random]") {
  Generator g1(42), g2(42), g3(43);
  const auto a = Tensor::randn({5, 7}, g1).to_vector();
  const auto b = Tensor::randn({5, 7}, g2).to_vector();
  const auto c = Tensor::randn({5, 7}, g3).to_vector();
  CHECK(a == b);
  CHECK(a != c);
  CHECK(g1.offset() == 9);  // ceil(35 / 4) blocks
  const auto a2 = Tensor::randn({5, 7}, g1).to_vector();
  CHECK(a2 != a);
  Generator other_stream(42, 1);
  CHECK(Tensor::randn({5, 7}, other_stream).to_vector() != a);
}

TEST_CASE("random values do not depend on the number of threads", "[random]") {
  const int threads = num_threads();
  Generator g1(7);
  set_num_threads(1);
  const auto one = Tensor::randn({300, 300}, g1).to_vector();
  set_num_threads(std::max(2, threads));
  Generator g2(7);
  const auto many = Tensor::randn({300, 300}, g2).to_vector();
  set_num_threads(threads);
  CHECK(one == many);
}

TEST_CASE("randn and uniform have the right moments and ranges", "[random]") {
  Generator gen(3);
  for (DType dtype : {DType::f32, DType::f64}) {
    const auto z = Tensor::randn({200000}, gen, dtype).to_vector();
    double mean = 0, var = 0;
    for (double v : z) mean += v;
    mean /= static_cast<double>(z.size());
    for (double v : z) var += (v - mean) * (v - mean);
    var /= static_cast<double>(z.size());
    CHECK(std::fabs(mean) < 0.01);
    CHECK(std::fabs(var - 1) < 0.02);
    const auto u = Tensor::uniform({100000}, -2, 3, gen, dtype).to_vector();
    double lo = 1e9, hi = -1e9, um = 0;
    for (double v : u) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      um += v;
    }
    CHECK(lo >= -2);
    CHECK(hi <= 3);
    CHECK(std::fabs(um / static_cast<double>(u.size()) - 0.5) < 0.02);
  }
}

TEST_CASE("host-side draws: next_below is in range and uniform enough", "[random]") {
  Generator gen(11);
  std::vector<int> counts(6, 0);
  for (int i = 0; i < 60000; ++i) ++counts[static_cast<std::size_t>(gen.next_below(6))];
  for (int c : counts) CHECK(std::abs(c - 10000) < 400);
  const double u = gen.next_uniform();
  CHECK(u > 0);
  CHECK(u < 1);
}

TEST_CASE("uniforms lie strictly inside (0, 1) even at the extreme bit patterns", "[random]") {
  CHECK(philox::uniform_f32(0xffffffffu) < 1.0f);
  CHECK(philox::uniform_f32(0u) > 0.0f);
  CHECK(philox::uniform_f64(0xffffffffu, 0xffffffffu) < 1.0);
  CHECK(philox::uniform_f64(0u, 0u) > 0.0);
}

TEST_CASE("the vectorised Philox batch equals block-by-block Philox", "[random]") {
  for (uint64_t first : {uint64_t{0}, uint64_t{13}, (uint64_t{1} << 32) - 5}) {
    for (int64_t count : {1, 15, 16, 17, 100}) {
      std::vector<uint32_t> words(static_cast<std::size_t>(4 * count));
      cpu::philox_words(0x1234567890ull, 7, first, count, words.data());
      for (int64_t i = 0; i < count; ++i) {
        const philox::Block b = philox::random_block(0x1234567890ull, 7, first + static_cast<uint64_t>(i));
        for (int w = 0; w < 4; ++w) CHECK(words[static_cast<std::size_t>(4 * i + w)] == b.v[w]);
      }
    }
  }
}

TEST_CASE("the vectorisable float exp agrees with std::exp to 3e-7 and handles the edges", "[random]") {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.001f) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(static_cast<double>(exp_fast(x)) - want) / want);
  }
  CHECK(worst < 3e-7);
  CHECK(exp_fast(-INFINITY) == 0.0f);
  CHECK(exp_fast(-1000.0f) == 0.0f);
  CHECK(exp_fast(1000.0f) == INFINITY);
  CHECK(std::isnan(exp_fast(NAN)));
  CHECK(exp_fast(0.0f) == 1.0f);
}

TEST_CASE("the vectorisable float tanh agrees with std::tanh to 5e-7, is odd, and handles the edges", "[random]") {
  double worst = 0;
  int64_t not_odd = 0;
  // Floats in [2^-20, 12) at a fine step (relative below 1, absolute above).
  for (float x = 0x1p-20f; x < 12.0f; x = x < 1.0f ? x * 1.0001f : x + 0.0001f) {
    const double want = std::tanh(static_cast<double>(x));
    worst = std::max(worst, std::fabs(static_cast<double>(tanh_fast(x)) - want) / want);
    not_odd += tanh_fast(-x) != -tanh_fast(x);
  }
  CHECK(worst < 5e-7);
  CHECK(not_odd == 0);
  for (float x = 0.5499f; x < 0.5501f; x = std::nextafter(x, 1.0f)) {  // either side of the switch
    CHECK(std::fabs(static_cast<double>(tanh_fast(x)) - std::tanh(static_cast<double>(x))) < 5e-7 * 0.5);
  }
  CHECK(tanh_fast(0.0f) == 0.0f);
  CHECK(std::signbit(tanh_fast(-0.0f)));
  CHECK(tanh_fast(1e-30f) == 1e-30f);
  CHECK(tanh_fast(INFINITY) == 1.0f);
  CHECK(tanh_fast(-INFINITY) == -1.0f);
  CHECK(tanh_fast(100.0f) == 1.0f);
  CHECK(std::isnan(tanh_fast(NAN)));
}
