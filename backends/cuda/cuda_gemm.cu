// Matrix products through cuBLAS (cublasSgemm / cublasDgemm and their strided-batched forms;
// cublasGemmEx for mixed precision's bf16 operands), the CUDA counterpart of
// backends/cpu/cpu_gemm.cpp. Our matrices are row-major; cuBLAS is column-major, so every call
// computes the transposed product (see row_major_gemm below).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <limits>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_common.cuh"
#include "core/error.h"
#include "core/tensor.h"

namespace qkgrad {

namespace {

// c = (beta == 0 ? 0 : beta * c) over n elements: the product of an empty sum (k == 0 or no
// batch entries). beta == 0 overwrites, so a C holding NaN becomes 0, as on the CPU.
// One thread per element (grid-stride loop).
template <typename T>
__global__ void scale_c_kernel(T* c, int64_t n, T beta) {
  for (int64_t i = cuda::first_index(); i < n; i += cuda::index_step()) {
    c[i] = beta == T(0) ? T(0) : beta * c[i];
  }
}

// The cuBLAS entry points by element type, so the code below is written once.
cublasStatus_t blas_gemm(cublasHandle_t h, cublasOperation_t op_first, cublasOperation_t op_second,
                         int rows, int cols, int depth, float alpha, const float* first,
                         int ld_first, const float* second, int ld_second, float beta, float* out,
                         int ld_out) {
  return cublasSgemm(h, op_first, op_second, rows, cols, depth, &alpha, first, ld_first, second,
                     ld_second, &beta, out, ld_out);
}
cublasStatus_t blas_gemm(cublasHandle_t h, cublasOperation_t op_first, cublasOperation_t op_second,
                         int rows, int cols, int depth, double alpha, const double* first,
                         int ld_first, const double* second, int ld_second, double beta,
                         double* out, int ld_out) {
  return cublasDgemm(h, op_first, op_second, rows, cols, depth, &alpha, first, ld_first, second,
                     ld_second, &beta, out, ld_out);
}
cublasStatus_t blas_gemm_strided(cublasHandle_t h, cublasOperation_t op_first,
                                 cublasOperation_t op_second, int rows, int cols, int depth,
                                 float alpha, const float* first, int ld_first,
                                 long long stride_first, const float* second, int ld_second,
                                 long long stride_second, float beta, float* out, int ld_out,
                                 long long stride_out, int count) {
  return cublasSgemmStridedBatched(h, op_first, op_second, rows, cols, depth, &alpha, first,
                                   ld_first, stride_first, second, ld_second, stride_second, &beta,
                                   out, ld_out, stride_out, count);
}
cublasStatus_t blas_gemm_strided(cublasHandle_t h, cublasOperation_t op_first,
                                 cublasOperation_t op_second, int rows, int cols, int depth,
                                 double alpha, const double* first, int ld_first,
                                 long long stride_first, const double* second, int ld_second,
                                 long long stride_second, double beta, double* out, int ld_out,
                                 long long stride_out, int count) {
  return cublasDgemmStridedBatched(h, op_first, op_second, rows, cols, depth, &alpha, first,
                                   ld_first, stride_first, second, ld_second, stride_second, &beta,
                                   out, ld_out, stride_out, count);
}

// Mixed precision: bf16 operands, float32 accumulation (CUBLAS_COMPUTE_32F) and C, through
// cublasGemmEx, which runs bf16 products on the tensor cores (Ampere and later). qkgrad's
// bfloat16 has CUDA's __nv_bfloat16 layout (the float's top 16 bits).
cublasStatus_t blas_gemm(cublasHandle_t h, cublasOperation_t op_first, cublasOperation_t op_second,
                         int rows, int cols, int depth, float alpha, const bfloat16* first,
                         int ld_first, const bfloat16* second, int ld_second, float beta, float* out,
                         int ld_out) {
  return cublasGemmEx(h, op_first, op_second, rows, cols, depth, &alpha, first, CUDA_R_16BF, ld_first,
                      second, CUDA_R_16BF, ld_second, &beta, out, CUDA_R_32F, ld_out, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT);
}
cublasStatus_t blas_gemm_strided(cublasHandle_t h, cublasOperation_t op_first,
                                 cublasOperation_t op_second, int rows, int cols, int depth,
                                 float alpha, const bfloat16* first, int ld_first,
                                 long long stride_first, const bfloat16* second, int ld_second,
                                 long long stride_second, float beta, float* out, int ld_out,
                                 long long stride_out, int count) {
  return cublasGemmStridedBatchedEx(h, op_first, op_second, rows, cols, depth, &alpha, first,
                                    CUDA_R_16BF, ld_first, stride_first, second, CUDA_R_16BF,
                                    ld_second, stride_second, &beta, out, CUDA_R_32F, ld_out,
                                    stride_out, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

// How a row-major product C = op(A) op(B) becomes a column-major cuBLAS call.
//
// A row-major matrix X of shape [r, c] (leading dimension c) is, read column-major, the matrix
// Xᵀ of shape [c, r] with the same leading dimension c. So cuBLAS sees our C [m, n] as
// Cᵀ [n, m] (ldc = n), and we ask it for
//     Cᵀ = (op(A) op(B))ᵀ = op(B)ᵀ op(A)ᵀ,
// a column-major product of n×k by k×m: cuBLAS (m, n, k) = our (n, m, k), with B first.
//
// First operand op(B)ᵀ, shape [n, k]:
//   - no trans_b: B is row-major [k, n]; column-major cuBLAS sees Bᵀ [n, k] with ld n, which
//     is op(B)ᵀ itself: CUBLAS_OP_N, ldb = n.
//   - trans_b: B is row-major [n, k] and op(B) = Bᵀ, so op(B)ᵀ = B; cuBLAS sees Bᵀ [k, n]
//     with ld k and must transpose it back: CUBLAS_OP_T, ldb = k.
// Second operand op(A)ᵀ, shape [k, m]:
//   - no trans_a: A is row-major [m, k]; cuBLAS sees Aᵀ [k, m] with ld k = op(A)ᵀ:
//     CUBLAS_OP_N, lda = k.
//   - trans_a: A is row-major [k, m] and op(A)ᵀ = A; cuBLAS sees Aᵀ [m, k] with ld m:
//     CUBLAS_OP_T, lda = m.
// So the transposes are kept as they are, only the operands and m, n swap places:
//   cublasXgemm(op_b, op_a, n, m, k, alpha, B, ldb, A, lda, beta, C, n)
// with lda = trans_a ? m : k and ldb = trans_b ? k : n — the row lengths of A and B as stored.
struct ColumnMajorCall {
  cublasOperation_t op_first, op_second;  // for B, then A
  int rows, cols, depth;                   // cuBLAS m, n, k = our n, m, k
  int ld_first, ld_second, ld_out;         // ldb, lda, ldc
};

ColumnMajorCall row_major_gemm(const GemmSpec& g) {
  ColumnMajorCall call;
  call.op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  call.op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  call.rows = static_cast<int>(g.n);
  call.cols = static_cast<int>(g.m);
  call.depth = static_cast<int>(g.k);
  call.ld_first = static_cast<int>(g.trans_b ? g.k : g.n);
  call.ld_second = static_cast<int>(g.trans_a ? g.m : g.k);
  call.ld_out = static_cast<int>(g.n);
  return call;
}

// C (TC) = alpha op(A) op(B) + beta C for the batch `g`, with operands of type TA: float or
// double (TA = TC), or bfloat16 with a float C (mixed precision). alpha and beta go to cuBLAS as
// TC: float for f32 and bf16, double for f64.
template <typename TA, typename TC>
void run_gemm(cublasHandle_t handle, const GemmSpec& g, const TA* pa, const TA* pb, TC* pc) {
  using T = TC;
  if (g.m == 0 || g.n == 0) return;  // C is empty
  const int64_t limit = std::numeric_limits<int>::max();
  QKGRAD_CHECK(g.m <= limit && g.n <= limit && g.k <= limit && g.batch <= limit,
               "gemm: a matrix dimension exceeds what cuBLAS can index (", limit, "): m ", g.m,
               ", n ", g.n, ", k ", g.k, ", batch ", g.batch, "; split the batch");
  const int64_t c_matrices = g.stride_c == 0 ? 1 : g.batch;
  if (g.k == 0 || g.batch == 0) {  // an empty sum: C = beta * C
    const int64_t count = c_matrices * g.m * g.n;
    if (count == 0) return;
    scale_c_kernel<T><<<cuda::grid_for(count), cuda::kThreads>>>(pc, count, static_cast<T>(g.beta));
    QKGRAD_CUDA_LAUNCHED();
    return;
  }
  const ColumnMajorCall call = row_major_gemm(g);
  const T alpha = static_cast<T>(g.alpha);
  if (g.batch == 1 || g.stride_c == 0) {
    // One GEMM, or products summed into the one C (stride_c == 0): one GEMM after another
    // on the one stream, the first with the caller's beta and the rest with beta = 1, so the
    // sum is added in batch order (deterministic).
    for (int64_t i = 0; i < g.batch; ++i) {
      const T beta = i == 0 ? static_cast<T>(g.beta) : T(1);
      QKGRAD_CUBLAS_CHECK(blas_gemm(handle, call.op_first, call.op_second, call.rows, call.cols, call.depth, alpha,
                                    pb + i * g.stride_b, call.ld_first, pa + i * g.stride_a, call.ld_second, beta,
                                    pc + i * g.stride_c, call.ld_out));
    }
    return;
  }
  // Independent products: one strided-batched call (a stride of 0 reuses the one A or B).
  QKGRAD_CUBLAS_CHECK(blas_gemm_strided(handle, call.op_first, call.op_second, call.rows, call.cols, call.depth,
                                        alpha, pb, call.ld_first, static_cast<long long>(g.stride_b), pa,
                                        call.ld_second, static_cast<long long>(g.stride_a), static_cast<T>(g.beta),
                                        pc, call.ld_out, static_cast<long long>(g.stride_c),
                                        static_cast<int>(g.batch)));
}

}  // namespace

// cuBLAS multiplies bf16 on the tensor cores from Ampere (compute capability 8.0) on; older
// GPUs have no bf16 units (PyTorch's torch.cuda.is_bf16_supported() draws the same line).
std::string CudaBackend::bf16_products_missing() const {
  int device = 0, major = 0, minor = 0;
  QKGRAD_CUDA_CHECK(cudaGetDevice(&device));
  QKGRAD_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  QKGRAD_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major >= 8) return "";
  cudaDeviceProp prop{};
  QKGRAD_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return cat("the GPU (", prop.name, ", compute capability ", major, ".", minor,
             ") has no bf16 tensor cores (Ampere, 8.0, and later have them)");
}

void CudaBackend::gemm(const GemmSpec& g, const Tensor& a, const Tensor& b, Tensor& c) {
  if (g.bias) return gemm_bias_in_c(g, a, b, c);  // C = bias, then C += op(A)op(B) (cuBLASLt could fuse it)
  if (a.dtype() == DType::bf16) {  // mixed precision: bf16 operands, a float32 result
    QKGRAD_CHECK(b.dtype() == DType::bf16 && c.dtype() == DType::f32, "gemm: bf16 operands need a bf16 partner and an "
                 "f32 result, got ", describe(b), " and ", describe(c));
    run_gemm(blas(), g, a.data<bfloat16>(), b.data<bfloat16>(), c.data<float>());
    return;
  }
  cuda::dispatch(c.dtype(), [&](auto tag) {
    using T = decltype(tag);
    run_gemm(blas(), g, a.data<T>(), b.data<T>(), c.data<T>());
  });
}

}  // namespace qkgrad
