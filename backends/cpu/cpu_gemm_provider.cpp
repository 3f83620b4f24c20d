// The float32 GEMM providers and the choice between them. See cpu_gemm_provider.h.
#include "backends/cpu/cpu_gemm_provider.h"

#include <cblas.h>
#include <omp.h>

#include <atomic>
#include <cstdlib>

#ifdef QKGRAD_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include "core/error.h"

#ifndef QKGRAD_DEFAULT_GEMM
#define QKGRAD_DEFAULT_GEMM openblas
#endif

namespace qkgrad::cpu {

namespace {

void openblas_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                    const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

#ifdef QKGRAD_HAVE_ONEDNN
void onednn_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const dnnl_status_t status = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  QKGRAD_CHECK(status == dnnl_success, "gemm: oneDNN's dnnl_sgemm failed (status ", static_cast<int>(status),
               ") for m ", m, ", n ", n, ", k ", k, "; QKGRAD_CPU_GEMM=openblas uses OpenBLAS instead");
}
#endif

GemmProvider check_available(GemmProvider provider) {
#ifndef QKGRAD_HAVE_ONEDNN
  QKGRAD_CHECK(provider != GemmProvider::onednn, "QKGRAD_CPU_GEMM: this qkgrad was built without oneDNN ",
               "(install libdnnl-dev and build again, or use openblas)");
#endif
  return provider;
}

// QKGRAD_CPU_GEMM, else the build's default.
GemmProvider initial_provider() {
  const char* chosen = std::getenv("QKGRAD_CPU_GEMM");
  if (chosen == nullptr || *chosen == '\0') return GemmProvider::QKGRAD_DEFAULT_GEMM;
  return check_available(parse_gemm_provider(chosen));
}

std::atomic<GemmProvider>& current() {
  static std::atomic<GemmProvider> provider{initial_provider()};
  return provider;
}

}  // namespace

const char* gemm_provider_name(GemmProvider provider) {
  return provider == GemmProvider::onednn ? "onednn" : "openblas";
}

std::vector<GemmProvider> available_gemm_providers() {
#ifdef QKGRAD_HAVE_ONEDNN
  return {GemmProvider::openblas, GemmProvider::onednn};
#else
  return {GemmProvider::openblas};
#endif
}

GemmProvider parse_gemm_provider(const std::string& name) {
  if (name == "openblas") return GemmProvider::openblas;
  if (name == "onednn") return GemmProvider::onednn;
  fail(cat("QKGRAD_CPU_GEMM: '", name, "' is not a GEMM provider; choose openblas or onednn"));
}

GemmProvider gemm_provider() { return current().load(std::memory_order_relaxed); }

void set_gemm_provider(GemmProvider provider) {
  current().store(check_available(provider), std::memory_order_relaxed);
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
#ifdef QKGRAD_HAVE_ONEDNN
  const bool small_alone = m * n * k < kSmallGemm && !omp_in_parallel();
  if (gemm_provider() == GemmProvider::onednn && !small_alone) {
    onednn_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#endif
  openblas_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace qkgrad::cpu
