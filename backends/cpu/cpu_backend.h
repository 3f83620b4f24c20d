// The CPU backend: OpenBLAS for every matrix product, OpenMP threads (static schedules, so
// results do not depend on timing), and simple inner loops the compiler vectorises.
// The kernels are spread over cpu_*.cpp by family; this header is the whole list.
#pragma once

#include "backends/cpu/cpu_allocator.h"
#include "core/backend.h"

namespace qkgrad {

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  Device device() const override { return Device::cpu; }

  // memory (cpu_backend.cpp)
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  AllocatorStats allocator_stats() const override;
  void release_cached_memory() override;
  void reset_peak_memory() override;
  void copy_from_host(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;

  // cpu_elementwise.cpp
  void fill(Tensor& out, double value) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void unary(UnaryOp op, UnaryParams p, const Tensor& x, Tensor& y) override;
  void unary_backward(UnaryOp op, UnaryParams p, const Tensor* x, const Tensor* y,
                      const Tensor& dy, Tensor& dx, bool accumulate) override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override;
  void where(const Tensor& mask, const Tensor& a, const Tensor& b, Tensor& out) override;
  void broadcast_to(const Tensor& x, Tensor& out) override;
  void scale(const Tensor& x, double alpha, Tensor& out) override;
  void axpy(double alpha, const Tensor& x, Tensor& y) override;
  void rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t heads, Tensor& y) override;

  // cpu_reduce.cpp
  void sum_axis(const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out) override;
  void sum_all(const Tensor& x, Tensor& out) override;
  double sum_of_squares(const std::vector<Tensor>& xs) override;
  void reduce_axis(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                   Tensor& out) override;
  void max_axis_backward(const Tensor& x, const Tensor& dy, int64_t outer, int64_t n, int64_t inner,
                         Tensor& dx) override;

  // cpu_gemm.cpp
  void gemm(const GemmSpec& spec, const Tensor& a, const Tensor& b, Tensor& c) override;
  std::string bf16_products_missing() const override;  // cpu::bf16_gemm_missing()

  // cpu_norm.cpp
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

  // cpu_attention.cpp (keeps P for the backward)
  AttentionState attention_state(const AttentionSpec& spec, DType dtype, bool want_probs) override;
  void attention_forward(const AttentionSpec& spec, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor* g, Tensor& out, AttentionState& state) override;
  void attention_backward(const AttentionSpec& spec, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor* g, const Tensor& out, const AttentionState& state, const Tensor& dout,
                          AttentionGrads& grads) override;

  // cpu_index.cpp
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

  // cpu_loss.cpp
  void cross_entropy(const Tensor& logits, const Tensor& targets, double smoothing,
                     int64_t ignore_index, Tensor& row_loss, Tensor& lse) override;
  void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                              double smoothing, int64_t ignore_index, const Tensor& dloss,
                              Tensor& dlogits) override;

  // cpu_random.cpp
  void fill_uniform(Tensor& out, double low, double high, RandomStream rs) override;
  void fill_normal(Tensor& out, double mean, double stddev, RandomStream rs) override;
  void dropout(const Tensor& x, double p, RandomStream rs, Tensor& y, Tensor& mask) override;
  void dropout_backward(const Tensor& dy, const Tensor& mask, double p, Tensor& dx) override;
  void word_dropout(const Tensor& ids, double p, int64_t replacement, RandomStream rs,
                    Tensor& out) override;

  // cpu_optim.cpp
  void sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, const SgdStep& s) override;
  void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamStep& s) override;

 private:
  void biased_gemm(const GemmSpec& spec, const Tensor& a, const Tensor& b, Tensor& c);  // cpu_gemm.cpp: GemmSpec::bias
  CpuCachingAllocator allocator_;
};

// Loops shorter than this run on one thread: waking the thread team costs more than it saves.
constexpr int64_t kParallelGrain = 1 << 15;

}  // namespace qkgrad
