// backends/cpu/cpu_gemm_provider.h: every float32 GEMM provider this build has computes the same
// products (to float32 rounding) as a float64 reference, for every transpose, leading
// dimensions wider than the matrix, alpha and beta, inside and outside a parallel region; each
// is deterministic; and the choice is made and refused by name.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <vector>

#include "backends/cpu/cpu_gemm_provider.h"
#include "core/error.h"
#include "core/generator.h"

using namespace qkgrad;
using cpu::GemmProvider;
using Catch::Matchers::Contains;

namespace {

// Restores the provider in use when a test is done with it.
struct ProviderGuard {
  GemmProvider saved = cpu::gemm_provider();
  ~ProviderGuard() { cpu::set_gemm_provider(saved); }
};

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  int64_t pad;  // extra columns in every leading dimension
  float alpha, beta;
};

// C = alpha op(A) op(B) + beta C in float64, row-major with leading dimensions.
std::vector<double> reference(const Case& c, const std::vector<float>& a, int64_t lda, const std::vector<float>& b,
                              int64_t ldb, const std::vector<float>& c0, int64_t ldc) {
  std::vector<double> out(c0.begin(), c0.end());
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double x = c.ta ? a[p * lda + i] : a[i * lda + p];
        const double y = c.tb ? b[j * ldb + p] : b[p * ldb + j];
        sum += x * y;
      }
      out[i * ldc + j] = c.alpha * sum + c.beta * c0[i * ldc + j];
    }
  }
  return out;
}

std::vector<float> random_floats(std::size_t n, uint64_t seed) {
  Generator g(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(g.next_uniform() * 2 - 1);
  return v;
}

}  // namespace

TEST_CASE("gemm providers: the same products as a float64 reference, deterministically", "[gemm]") {
  ProviderGuard guard;
  const std::vector<Case> cases = {
      {1, 1, 1, false, false, 0, 1.0f, 0.0f},       {7, 5, 3, false, false, 0, 1.0f, 0.0f},
      {7, 5, 3, true, false, 2, 0.5f, 0.0f},        {7, 5, 3, false, true, 1, 1.0f, 1.0f},
      {33, 17, 65, true, true, 3, -2.0f, 0.25f},    {70, 80, 90, false, true, 0, 1.0f, 0.0f},  // above 64³
      {128, 96, 200, true, false, 5, 1.0f, 1.0f},   {3, 300, 2, false, false, 0, 1.0f, 0.0f},
      {100, 90, 80, true, false, 2, 1.0f, 0.0f},    // above 64³, A transposed
  };
  for (const GemmProvider provider : cpu::available_gemm_providers()) {
    cpu::set_gemm_provider(provider);
    for (const Case& c : cases) {
      CAPTURE(cpu::gemm_provider_name(provider), c.m, c.n, c.k, c.ta, c.tb, c.pad, c.alpha, c.beta);
      const int64_t lda = (c.ta ? c.m : c.k) + c.pad, ldb = (c.tb ? c.k : c.n) + c.pad, ldc = c.n + c.pad;
      const auto a = random_floats(static_cast<std::size_t>((c.ta ? c.k : c.m) * lda), 1);
      const auto b = random_floats(static_cast<std::size_t>((c.tb ? c.n : c.k) * ldb), 2);
      const auto c0 = random_floats(static_cast<std::size_t>(c.m * ldc), 3);
      const std::vector<double> want = reference(c, a, lda, b, ldb, c0, ldc);
      std::vector<float> got = c0, again = c0, in_parallel = c0;
      cpu::sgemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, got.data(), ldc);
      cpu::sgemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, again.data(), ldc);
#pragma omp parallel num_threads(2)
      {
#pragma omp single
        cpu::sgemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, in_parallel.data(), ldc);
      }
      double worst = 0;
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          const auto at = static_cast<std::size_t>(i * ldc + j);
          const double scale = std::abs(c.alpha) * static_cast<double>(c.k) + std::abs(c.beta);
          worst = std::max(worst, std::abs(got[at] - want[at]) / scale);
          CHECK(std::abs(in_parallel[at] - want[at]) / scale < 1e-6);
        }
      }
      CHECK(worst < 1e-6);
      CHECK(got == again);  // deterministic for the same shape and threads
      // The padding columns of C are never written.
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = c.n; j < ldc; ++j) CHECK(got[static_cast<std::size_t>(i * ldc + j)] == c0[static_cast<std::size_t>(i * ldc + j)]);
      }
      if (c.alpha != 1.0f || c.beta != 0.0f) continue;
      // With a bias (linear's; oneDNN adds it inside its kernel): every row of C gets it added.
      const auto bias = random_floats(static_cast<std::size_t>(c.n), 4);
      std::vector<float> biased = c0;
      cpu::sgemm(c.ta, c.tb, c.m, c.n, c.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, biased.data(), ldc, bias.data());
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < ldc; ++j) {
          const auto at = static_cast<std::size_t>(i * ldc + j);
          if (j >= c.n) CHECK(biased[at] == c0[at]);  // padding untouched
          else CHECK(std::abs(biased[at] - (want[at] + bias[static_cast<std::size_t>(j)])) / (static_cast<double>(c.k) + 1) < 1e-6);
        }
      }
    }
    const std::vector<float> x(4, 1.0f), bias(2, 1.0f);
    std::vector<float> y(4);
    CHECK_THROWS_WITH(cpu::sgemm(false, false, 2, 2, 2, 1.0f, x.data(), 2, x.data(), 2, 1.0f, y.data(), 2, bias.data()),
                      Contains("gemm: a bias needs alpha 1 and beta 0, got 1 and 1"));
  }
}

TEST_CASE("gemm providers: chosen by name; unknown or missing ones refused", "[gemm][errors]") {
  ProviderGuard guard;
  CHECK(cpu::parse_gemm_provider("openblas") == GemmProvider::openblas);
  CHECK(cpu::parse_gemm_provider("onednn") == GemmProvider::onednn);
  CHECK_THROWS_WITH(cpu::parse_gemm_provider("mkl"),
                    Contains("QKGRAD_CPU_GEMM: 'mkl' is not a GEMM provider; choose openblas or onednn"));
  const auto available = cpu::available_gemm_providers();
  CHECK(available.front() == GemmProvider::openblas);  // always built in (float64 needs it too)
  if (available.size() == 1) {
    CHECK_THROWS_WITH(cpu::set_gemm_provider(GemmProvider::onednn), Contains("built without oneDNN"));
  } else {
    cpu::set_gemm_provider(GemmProvider::onednn);
    CHECK(cpu::gemm_provider() == GemmProvider::onednn);
  }
  cpu::set_gemm_provider(GemmProvider::openblas);
  CHECK(cpu::gemm_provider() == GemmProvider::openblas);
  CHECK(std::string(cpu::gemm_provider_name(GemmProvider::onednn)) == "onednn");
}

TEST_CASE("bf16 gemm: bfloat16 operands, float32 accumulation: the float64 product of the bf16 values", "[gemm][bf16]") {
  INFO("native bf16 here: " << (cpu::bf16_gemm_missing().empty() ? "yes" : cpu::bf16_gemm_missing()));
  const std::vector<Case> cases = {{64, 48, 80, false, false, 0, 1.0f, 0.0f},  {33, 70, 129, false, true, 3, 1.0f, 0.0f},
                                   {50, 20, 300, true, false, 1, 0.5f, 0.0f},  {17, 9, 31, true, true, 2, 1.0f, 1.0f},
                                   {128, 64, 512, false, true, 0, -2.0f, 0.25f}, {5, 7, 0, false, false, 0, 1.0f, 0.5f}};
  for (const Case& c : cases) {
    INFO("m " << c.m << " n " << c.n << " k " << c.k << " ta " << c.ta << " tb " << c.tb << " alpha " << c.alpha
              << " beta " << c.beta);
    const int64_t lda = (c.ta ? c.m : c.k) + c.pad, ldb = (c.tb ? c.k : c.n) + c.pad, ldc = c.n + c.pad;
    const std::vector<float> af = random_floats(static_cast<std::size_t>((c.ta ? c.k : c.m) * lda), 11);
    const std::vector<float> bf = random_floats(static_cast<std::size_t>((c.tb ? c.n : c.k) * ldb), 12);
    // The operands as bf16, and their exact float values for the reference.
    std::vector<bfloat16> a16, b16;
    std::vector<float> a_exact, b_exact;
    for (float x : af) a16.push_back(bfloat16(x)), a_exact.push_back(static_cast<float>(a16.back()));
    for (float x : bf) b16.push_back(bfloat16(x)), b_exact.push_back(static_cast<float>(b16.back()));
    const std::vector<float> c0 = random_floats(static_cast<std::size_t>(c.m * ldc), 13);
    std::vector<float> out = c0;
    cpu::bf16_gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a16.data(), lda, b16.data(), ldb, c.beta, out.data(), ldc);
    const std::vector<double> want = reference(c, a_exact, lda, b_exact, ldb, c0, ldc);
    double worst = 0;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        worst = std::max(worst, std::fabs(out[static_cast<std::size_t>(i * ldc + j)] - want[static_cast<std::size_t>(i * ldc + j)]));
      }
    }
    // Only float32 summation of exact products: |error| <= k · 2^-24 · Σ|a·b| (< k · 2^-24 here).
    CHECK(worst <= 1e-6 * (static_cast<double>(c.k) + 1) * std::max(1.0f, std::fabs(c.alpha)) + 1e-6);
    // Padding columns are left alone.
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = c.n; j < ldc; ++j) CHECK(out[static_cast<std::size_t>(i * ldc + j)] == c0[static_cast<std::size_t>(i * ldc + j)]);
    }
    if (c.alpha != 1.0f || c.beta != 0.0f) continue;
    // With a bias (linear's, fused into the kernel): every row of C gets it added.
    const std::vector<float> bias = random_floats(static_cast<std::size_t>(c.n), 14);
    std::vector<float> biased = c0;
    cpu::bf16_gemm(c.ta, c.tb, c.m, c.n, c.k, 1.0f, a16.data(), lda, b16.data(), ldb, 0.0f, biased.data(), ldc,
                   bias.data());
    double worst_biased = 0;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        const auto at = static_cast<std::size_t>(i * ldc + j);
        worst_biased = std::max(worst_biased, std::fabs(biased[at] - (want[at] + bias[static_cast<std::size_t>(j)])));
      }
      for (int64_t j = c.n; j < ldc; ++j) CHECK(biased[static_cast<std::size_t>(i * ldc + j)] == c0[static_cast<std::size_t>(i * ldc + j)]);
    }
    CHECK(worst_biased <= 1e-6 * (static_cast<double>(c.k) + 2) + 1e-6);
  }
  CHECK_THROWS_WITH(cpu::bf16_gemm(false, false, 1, 1, 1, 2.0f, nullptr, 1, nullptr, 1, 0.0f, nullptr, 1,
                                   std::vector<float>(1).data()),
                    Contains("a bias needs alpha 1 and beta 0"));
}
