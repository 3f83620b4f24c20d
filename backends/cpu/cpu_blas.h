// Row-major GEMM with explicit leading dimensions, for float (through the provider in use:
// cpu_gemm_provider.h, oneDNN or OpenBLAS) and double (OpenBLAS):
//   C = alpha · op(A) · op(B) + beta · C,  op(A): [m, k], op(B): [k, n], C: [m, n]
// lda, ldb, ldc are the row strides of A, B and C as stored (so a head's slice of a
// [B, T, H·d] tensor is read in place with ld = H·d).
#pragma once

#include <cblas.h>

#include <cstdint>

#include "backends/cpu/cpu_gemm_provider.h"

namespace qkgrad::cpu {

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, double beta, float* c, int64_t ldc) {
  sgemm(ta, tb, m, n, k, static_cast<float>(alpha), a, lda, b, ldb, static_cast<float>(beta), c, ldc);
}

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                 int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

// Mixed precision: bfloat16 operands, float32 accumulation and C (cpu::bf16_gemm).
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const bfloat16* a,
                 int64_t lda, const bfloat16* b, int64_t ldb, double beta, float* c, int64_t ldc) {
  bf16_gemm(ta, tb, m, n, k, static_cast<float>(alpha), a, lda, b, ldb, static_cast<float>(beta), c, ldc);
}

// The same for contiguous matrices: lda, ldb, ldc follow from the shapes. A is the operands'
// type, C the result's (both float or double; bfloat16 operands with a float C).
template <typename A, typename C>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const A* a, const A* b,
          double beta, C* c) {
  gemm(ta, tb, m, n, k, alpha, a, ta ? m : k, b, tb ? k : n, beta, c, n);
}

}  // namespace qkgrad::cpu
