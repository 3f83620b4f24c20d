// The float32 GEMM providers and the choice between them. See cpu_gemm_provider.h.
#include "backends/cpu/cpu_gemm_provider.h"

#include <cblas.h>
#include <omp.h>

#include <atomic>
#include <type_traits>
#include <unordered_map>
#include <cstdlib>
#include <vector>

#ifdef QKGRAD_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>
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

namespace {

#ifdef QKGRAD_HAVE_ONEDNN
template <typename T> constexpr dnnl::memory::data_type dnnl_type();
template <> constexpr dnnl::memory::data_type dnnl_type<float>() { return dnnl::memory::data_type::f32; }
template <> constexpr dnnl::memory::data_type dnnl_type<bfloat16>() { return dnnl::memory::data_type::bf16; }

// oneDNN's matmul primitive on T (float or bfloat16) src and weights with an f32 destination;
// alpha as its output scale, beta as a sum post-op, the bias as its f32 bias (a [1, n] row,
// broadcast, added inside the kernel). A transposed operand is the same memory with swapped
// strides. oneDNN caches the primitive per shape (its primitive cache), so a training step's
// repeated shapes are created once.
template <typename T>
void onednn_matmul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
                   const T* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  using dnnl::memory;
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const memory::desc a_md({m, k}, dnnl_type<T>(), ta ? memory::dims{1, lda} : memory::dims{lda, 1});
  const memory::desc b_md({k, n}, dnnl_type<T>(), tb ? memory::dims{1, ldb} : memory::dims{ldb, 1});
  const memory::desc c_md({m, n}, memory::data_type::f32, memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  try {
    const memory::desc bias_md({1, n}, memory::data_type::f32, memory::dims{n, 1});
    const dnnl::matmul::primitive_desc pd(
        bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md) : dnnl::matmul::desc(a_md, b_md, c_md), attr, engine);
    dnnl::stream stream(engine);
    memory a_mem(a_md, engine, const_cast<T*>(a)), b_mem(b_md, engine, const_cast<T*>(b)), c_mem(c_md, engine, c);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}};
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(bias_md, engine, const_cast<float*>(bias)));
    dnnl::matmul(pd).execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    fail(cat(std::is_same_v<T, float> ? "gemm" : "bf16 gemm", ": oneDNN's matmul failed (", e.what(), ") for m ", m,
             ", n ", n, ", k ", k));
  }
}
#endif

// With a bias and no kernel to add it: C = bias in every row (C: [m, n], row stride ldc), and
// the beta that then adds the product on top (1). Without one: C untouched, beta as given.
float bias_into_c(const float* bias, int64_t m, int64_t n, float* c, int64_t ldc, float beta) {
  if (bias == nullptr) return beta;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = bias[j];
  return 1.0f;
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  QKGRAD_CHECK(bias == nullptr || (alpha == 1.0f && beta == 0.0f), "gemm: a bias needs alpha 1 and beta 0, got ",
               alpha, " and ", beta);
#ifdef QKGRAD_HAVE_ONEDNN
  const bool small_alone = m * n * k < kSmallGemm && !omp_in_parallel();
  if (gemm_provider() == GemmProvider::onednn && !small_alone) {
    if (bias && m > 0 && n > 0 && k > 0) {  // the bias inside the kernel: no pass of its own over C
      onednn_matmul(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
      return;
    }
    onednn_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, bias_into_c(bias, m, n, c, ldc, beta), c, ldc);
    return;
  }
#endif
  openblas_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, bias_into_c(bias, m, n, c, ldc, beta), c, ldc);
}

namespace {

// Without native bf16: widen both operands (exactly) and multiply in float32.
void widened_bf16_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a, int64_t lda,
                       const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  auto widen = [](const bfloat16* x, int64_t rows, int64_t ld) {
    std::vector<float> out(static_cast<std::size_t>(rows * ld));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(x[i]);
    return out;
  };
  const std::vector<float> fa = widen(a, ta ? k : m, lda), fb = widen(b, tb ? n : k, ldb);
  sgemm(ta, tb, m, n, k, alpha, fa.data(), lda, fb.data(), ldb, beta, c, ldc, bias);
}

}  // namespace

std::string bf16_gemm_missing() {
#ifdef QKGRAD_HAVE_ONEDNN
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  const bool native = isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  return native ? "" : "this CPU has neither AVX512_BF16 nor AMX (oneDNN's bf16 products would be emulated)";
#else
  return "this qkgrad was built without oneDNN (install libdnnl-dev and build again)";
#endif
}

void bf16_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a, int64_t lda,
               const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  QKGRAD_CHECK(bias == nullptr || (alpha == 1.0f && beta == 0.0f), "bf16 gemm: a bias needs alpha 1 and beta 0, got ",
               alpha, " and ", beta);
#ifdef QKGRAD_HAVE_ONEDNN
  if (m > 0 && n > 0 && k > 0) {
    onednn_matmul(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
    return;
  }
#endif
  widened_bf16_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
}

}  // namespace qkgrad::cpu
