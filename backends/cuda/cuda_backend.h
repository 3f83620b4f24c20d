// The CUDA backend (meson setup build -Dcuda=true): cuBLAS for every matrix product, our own
// kernels for the rest. The kernels are spread over cuda_*.cu by family, mirroring
// backends/cpu/; this header is the whole list.
//
// Conventions every file follows:
// - One stream: every kernel, copy and cuBLAS call runs on the default stream, so work is
//   ordered and a block freed to the caching allocator can be reused at once.
// - Every CUDA runtime and cuBLAS call is checked (cuda_check.h); every launch is followed by
//   QKGRAD_CUDA_LAUNCHED() so a bad launch names its file and line.
// - Deterministic: no floating-point atomics. A reduction adds in an order fixed by the shapes
//   (a fixed tree inside a block, partial results reduced in a fixed order), so a run repeats
//   bit for bit on the same GPU. The order differs from the CPU's, so results match the CPU to
//   rounding (tests/test_cuda.cpp states the tolerances), not bit for bit — except the random
//   kernels (Philox, core/philox.h), whose masks and values are identical.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/backend.h"

namespace qkgrad {

// Device memory: cudaMalloc only when the cache has no free block that fits (cuda_backend.cu).
class CudaCachingAllocator {
 public:
  void* allocate(std::size_t bytes);
  void deallocate(void* ptr);
  AllocatorStats stats() const;
  void release();
  void reset_peak();

 private:
  void release_locked();
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;         // size -> block
  std::unordered_map<void*, std::size_t> live_;    // block -> size
  AllocatorStats stats_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend();
  Device device() const override { return Device::cuda; }

  // memory, fill, copy, random fills (cuda_backend.cu)
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  AllocatorStats allocator_stats() const override;
  void release_cached_memory() override;
  void reset_peak_memory() override;
  void copy_from_host(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  void fill(Tensor& out, double value) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void fill_uniform(Tensor& out, double low, double high, RandomStream rs) override;
  void fill_normal(Tensor& out, double mean, double stddev, RandomStream rs) override;

  // cuda_elementwise.cu
  void unary(UnaryOp op, UnaryParams p, const Tensor& x, Tensor& y) override;
  void unary_backward(UnaryOp op, UnaryParams p, const Tensor* x, const Tensor* y,
                      const Tensor& dy, Tensor& dx, bool accumulate) override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override;
  void where(const Tensor& mask, const Tensor& a, const Tensor& b, Tensor& out) override;
  void broadcast_to(const Tensor& x, Tensor& out) override;
  void scale(const Tensor& x, double alpha, Tensor& out) override;
  void axpy(double alpha, const Tensor& x, Tensor& y) override;
  void rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t heads, Tensor& y) override;

  // cuda_reduce.cu
  void sum_axis(const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out) override;
  void sum_all(const Tensor& x, Tensor& out) override;
  double sum_of_squares(const std::vector<Tensor>& xs) override;
  void reduce_axis(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                   Tensor& out) override;
  void max_axis_backward(const Tensor& x, const Tensor& dy, int64_t outer, int64_t n, int64_t inner,
                         Tensor& dx) override;

  // cuda_gemm.cu
  void gemm(const GemmSpec& spec, const Tensor& a, const Tensor& b, Tensor& c) override;
  std::string bf16_products_missing() const override;  // "" from compute capability 8.0 (Ampere)

  // cuda_norm.cu
  void softmax(const Tensor& x, Tensor& y, bool log) override;
  void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx, bool log) override;
  void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps, Tensor& y,
                  Tensor& mean, Tensor& rstd) override;
  void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                           const Tensor& rstd, const Tensor& dy, Tensor* dx, Tensor* dgamma,
                           Tensor* dbeta) override;
  void rms_norm(const Tensor& x, const Tensor& gamma, double eps, Tensor& y, Tensor& rstd) override;
  void rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& rstd, const Tensor& dy, Tensor* dx,
                         Tensor* dgamma) override;
  void l2_normalize(const Tensor& x, double eps, Tensor& y, Tensor& norm) override;
  void l2_normalize_backward(const Tensor& y, const Tensor& norm, double eps, const Tensor& dy,
                             Tensor& dx) override;

  // cuda_attention.cu (flash-style: keeps lse, recomputes P in the backward); attention_state
  // is in cuda_backend.cu
  AttentionState attention_state(const AttentionSpec& spec, DType dtype, bool want_probs) override;
  void attention_forward(const AttentionSpec& spec, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor* g, Tensor& out, AttentionState& state) override;
  void attention_backward(const AttentionSpec& spec, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor* g, const Tensor& out, const AttentionState& state, const Tensor& dout,
                          AttentionGrads& grads) override;

  // cuda_index.cu
  void permute(const Tensor& x, const std::vector<int>& perm, Tensor& out) override;
  void copy_block(const Tensor& src, int64_t src_n, int64_t src_start, Tensor& dst, int64_t dst_n,
                  int64_t dst_start, int64_t outer, int64_t len, int64_t inner,
                  bool accumulate) override;
  void index_select(const Tensor& x, const Tensor& ids, int64_t outer, int64_t n, int64_t inner,
                    Tensor& out) override;
  void index_select_prefix(const Tensor& x, const Tensor& ids, int64_t used, Tensor& out) override;
  void index_add(const Tensor& dy, const Tensor& ids, int64_t outer, int64_t n, int64_t inner,
                 Tensor& dx) override;
  void gather(const Tensor& x, const Tensor& index, int64_t outer, int64_t n, int64_t k,
              int64_t inner, Tensor& out) override;
  void scatter_add(const Tensor& dy, const Tensor& index, int64_t outer, int64_t n, int64_t k,
                   int64_t inner, Tensor& dx) override;

  // cuda_loss.cu
  void cross_entropy(const Tensor& logits, const Tensor& targets, double smoothing,
                     int64_t ignore_index, Tensor& row_loss, Tensor& lse) override;
  void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                              double smoothing, int64_t ignore_index, const Tensor& dloss,
                              Tensor& dlogits) override;

  // cuda_random.cu
  void dropout(const Tensor& x, double p, RandomStream rs, Tensor& y, Tensor& mask) override;
  void dropout_backward(const Tensor& dy, const Tensor& mask, double p, Tensor& dx) override;
  void word_dropout(const Tensor& ids, double p, int64_t replacement, RandomStream rs,
                    Tensor& out) override;

  // cuda_optim.cu
  void sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, const SgdStep& s) override;
  void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamStep& s) override;

  // The cuBLAS handle (created with the backend, bound to the default stream).
  cublasHandle_t blas() const { return blas_; }

 private:
  CudaCachingAllocator allocator_;
  cublasHandle_t blas_ = nullptr;
};

// TF32 tensor-core math for float32 GEMMs: off by default (results then match the CPU to float32
// rounding); QKGRAD_CUDA_TF32=1 in the environment turns it on (about 10 bits of mantissa in
// the products, much faster on Ampere and newer).
bool cuda_tf32_enabled();

}  // namespace qkgrad
