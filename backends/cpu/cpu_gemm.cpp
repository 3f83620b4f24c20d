// Matrix products, batched or not: float32 through the GEMM provider in use (oneDNN or OpenBLAS,
// cpu_gemm_provider.h), float64 through OpenBLAS (cpu_blas.h).
#include <limits>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_blas.h"
#include "backends/cpu/cpu_common.h"
#include "core/error.h"

namespace qkgrad {

namespace {

// C (TC) = alpha op(A) op(B) + beta C for the batch `g`, with operands of type TA: float or
// double (TA = TC), or bfloat16 with a float C (mixed precision).
template <typename TA, typename TC>
void run_gemm(const GemmSpec& g, const TA* pa, const TA* pb, TC* pc) {
  using T = TC;
    if (g.m == 0 || g.n == 0) return;
    const int64_t limit = std::numeric_limits<blasint>::max();
    QKGRAD_CHECK(g.m <= limit && g.n <= limit && g.k <= limit && g.batch * g.m <= limit &&
                     g.batch * g.k <= limit,
                 "gemm: a matrix dimension exceeds what BLAS can index (", limit, "): m ", g.m,
                 ", n ", g.n, ", k ", g.k, ", batch ", g.batch, "; split the batch");
    const int64_t c_matrices = g.stride_c == 0 ? 1 : g.batch;
    if (g.k == 0 || g.batch == 0) {  // an empty sum: C = beta * C
      for (int64_t i = 0; i < c_matrices * g.m * g.n; ++i) {
        pc[i] = g.beta == 0 ? T(0) : static_cast<T>(g.beta) * pc[i];
      }
      return;
    }
    // A batch that shares B and stacks contiguous A and C matrices is one tall GEMM.
    if (g.batch > 1 && g.stride_b == 0 && !g.trans_a && g.stride_a == g.m * g.k &&
        g.stride_c == g.m * g.n) {
      cpu::gemm(false, g.trans_b, g.batch * g.m, g.n, g.k, g.alpha, pa, pb, g.beta, pc);
      return;
    }
    // One multi-threaded GEMM after another: large matrices, or products summed into one C
    // (stride_c == 0), which must be added in order.
    if (g.batch == 1 || g.m * g.n * g.k >= cpu::kSmallGemm || g.stride_c == 0) {
      for (int64_t i = 0; i < g.batch; ++i) {
        const double beta = (g.stride_c == 0 && i > 0) ? 1.0 : g.beta;
        cpu::gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, pa + i * g.stride_a,
                  pb + i * g.stride_b, beta, pc + i * g.stride_c);
      }
      return;
    }
    // Many small independent matrices (below cpu::kSmallGemm): one per thread; inside this
    // parallel region each provider runs single-threaded.
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < g.batch; ++i) {
      cpu::gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, pa + i * g.stride_a,
                pb + i * g.stride_b, g.beta, pc + i * g.stride_c);
    }
}

void check_bf16_operands(const Tensor& b, const Tensor& c) {
  QKGRAD_CHECK(b.dtype() == DType::bf16 && c.dtype() == DType::f32, "gemm: bf16 operands need a bf16 partner and an "
               "f32 result, got ", describe(b), " and ", describe(c));
}

}  // namespace

std::string CpuBackend::bf16_products_missing() const { return cpu::bf16_gemm_missing(); }

// C = op(A)op(B) + bias (one matrix, GemmSpec::bias). f32 and bf16 operands: the bias is added
// inside oneDNN's kernel (cpu::sgemm, cpu::bf16_gemm), with no pass of its own over C; float64
// writes it into C first (Backend::gemm_bias_in_c), as does an empty product (run_gemm's cases).
void CpuBackend::biased_gemm(const GemmSpec& g, const Tensor& a, const Tensor& b, Tensor& c) {
  if (a.dtype() == DType::f64 || g.m == 0 || g.n == 0 || g.k == 0) return gemm_bias_in_c(g, a, b, c);
  check_gemm_bias(g, c);
  const int64_t lda = g.trans_a ? g.m : g.k, ldb = g.trans_b ? g.k : g.n;
  const float* bias = g.bias->data<float>();
  if (a.dtype() == DType::bf16) {
    check_bf16_operands(b, c);
    cpu::bf16_gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, a.data<bfloat16>(), lda, b.data<bfloat16>(), ldb, 0.0f,
                   c.data<float>(), g.n, bias);
    return;
  }
  cpu::sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, a.data<float>(), lda, b.data<float>(), ldb, 0.0f,
             c.data<float>(), g.n, bias);
}

void CpuBackend::gemm(const GemmSpec& g, const Tensor& a, const Tensor& b, Tensor& c) {
  if (g.bias) return biased_gemm(g, a, b, c);
  if (a.dtype() == DType::bf16) {  // mixed precision: bf16 operands, a float32 result
    check_bf16_operands(b, c);
    run_gemm(g, a.data<bfloat16>(), b.data<bfloat16>(), c.data<float>());
    return;
  }
  cpu::dispatch(c.dtype(), [&](auto tag) {
    using T = decltype(tag);
    run_gemm(g, a.data<T>(), b.data<T>(), c.data<T>());
  });
}

}  // namespace qkgrad
