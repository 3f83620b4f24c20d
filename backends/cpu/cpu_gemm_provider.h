// Who multiplies float32 matrices on the CPU: OpenBLAS (cblas_sgemm) or oneDNN (dnnl_sgemm,
// Debian libdnnl-dev). Both are row-major with explicit leading dimensions:
//   C = alpha · op(A) · op(B) + beta · C,  op(A): [m, k], op(B): [k, n], C: [m, n]
// Every float32 product of the library goes through sgemm() below (cpu_blas.h); float64 always
// uses OpenBLAS (the gradient checks), whichever provider is chosen.
//
// The default is chosen by measurement (bench/bench_sgemm.cpp, README "Numbers"): oneDNN when
// the build found it (meson -Dcpu_gemm=auto|onednn|openblas), since at the model's shapes it
// reaches 90-100% of the machine's peak on 2 threads where OpenBLAS's threading leaves much of
// the second core idle. QKGRAD_CPU_GEMM=openblas|onednn overrides it at run time.
//
// Threads: both libraries run on the one OpenMP runtime (libgomp) with our own loops, so there
// is no oversubscription: inside one of our parallel regions each call runs on its own thread.
// One measured exception: a small product (fewer than 64³ multiply-adds) called outside a
// parallel region goes to OpenBLAS, which runs it on one thread, where oneDNN would split it
// across all of them and lose more to the hand-off than it gains.
// Results are deterministic for a given provider, shape and thread count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/bfloat16.h"

namespace qkgrad::cpu {

enum class GemmProvider { openblas, onednn };

// A product of fewer multiply-adds than this is small: it is not worth splitting across threads
// (cpu_gemm.cpp runs a batch of them one per thread; alone, sgemm gives it to OpenBLAS).
inline constexpr int64_t kSmallGemm = 64 * 64 * 64;

const char* gemm_provider_name(GemmProvider provider);     // "openblas", "onednn"
std::vector<GemmProvider> available_gemm_providers();      // what this build has
GemmProvider gemm_provider();                               // the one in use
// For benchmarks and tests: use `provider` from now on (throws if this build lacks it).
void set_gemm_provider(GemmProvider provider);
// "openblas" or "onednn" to a provider; throws naming the choices for anything else.
GemmProvider parse_gemm_provider(const std::string& name);

// The float32 GEMM, row-major, through the provider in use. `bias` (optional, [n], only with
// alpha 1 and beta 0) is added to every row of C: with oneDNN inside its matmul kernel (the
// linear layer's bias costs no pass of its own over C), with OpenBLAS written into C first and
// multiplied with beta 1.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias = nullptr);

// The mixed-precision GEMM: bfloat16 operands, float32 accumulation and result (the same
// C = alpha · op(A) · op(B) + beta · C). Each product of two bf16 values is exact in float32, so
// the result differs from sgemm on the operands' float32 values only in summation order. With
// oneDNN, its matmul primitive (on AVX512_BF16 or AMX: native bf16 dot products, twice float32's
// rate; cached per shape by oneDNN); without it, the operands are widened to float32 and
// multiplied by sgemm (correct, no faster). bf16_gemm_missing() says which. `bias` (optional,
// [n], only with alpha 1 and beta 0) is added to every row of C, inside oneDNN's kernel.
void bf16_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a, int64_t lda,
               const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias = nullptr);
// Whether bf16_gemm runs on native bf16 instructions here (oneDNN built in, and the CPU has
// AVX512_BF16 or AMX); "" or what it lacks, for a message.
std::string bf16_gemm_missing();

}  // namespace qkgrad::cpu
