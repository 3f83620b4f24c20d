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

// The same for contiguous matrices: lda, ldb, ldc follow from the shapes.
template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const T* a, const T* b,
          double beta, T* c) {
  gemm(ta, tb, m, n, k, alpha, a, ta ? m : k, b, tb ? k : n, beta, c, n);
}

}  // namespace qkgrad::cpu
